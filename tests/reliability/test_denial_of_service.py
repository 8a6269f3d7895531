"""Denial of service on the policy server (issue #38): the authorized client's calls beside each attack.

Through network namespaces (tests/multihost/harness.run_attacks: server, client and attacker hosts; needs root)
the authorized client makes its calls alone, then beside each attack from the attacker's host: `slots` (callers
without the token, that many calls in flight at once), `handshakes` (connections that send the HTTP/2 preface
and nothing else) and `idle_connections` (TCP connections that send nothing). Each authorized call is one input:
ok (a chunk of the policy's shape, all finite), crash (refused or failed: the client was not served), hang
(DEADLINE_EXCEEDED at the client's 10 s timeout), data lost (a reply with another shape or non-finite values).
The figure is the client's p99 latency beside the attack over its p99 alone (`extra`: both in microseconds, and
the server's counts of what it refused); the issue's bound is 2x. A fresh server per attack. The default run
holds 8 connections / 2 callers and 60 calls; `make reliability` 200 connections / 32 callers and 200 calls per phase.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzz_harness import Counts, Finding

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "multihost"))
from harness import DOS_FULL, p99, run_attacks, unavailable

pytestmark = [pytest.mark.ros, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

TARGETS = {"unauthenticated": "slots", "preface": "handshakes", "silent": "idle_connections"}
QUICK = {"preface": 8, "silent": 8, "unauthenticated": 2}
OUTCOME = {"OK": "ok", "DEADLINE_EXCEEDED": "hang", "WRONG_REPLY": "data_lost"}
SERVER_COUNTS = ("refused_unauthenticated", "refused_busy", "refused_connections", "evicted_connections",
                 "closed_before_a_call", "banned_peers")  # fmt: skip


def record(results: dict[str, dict[str, Any]], calls: int) -> list[Counts]:
    rows = []
    for kind, target in TARGETS.items():
        idle, attacked = results[kind]["idle"], results[kind]["attacked"]
        counts = Counts(f"policy_server_dos_{target}")
        for code, number in sorted(attacked["codes"].items()):
            outcome = OUTCOME.get(code, "crash")
            for index in range(number):
                finding = None if outcome == "ok" else Finding(counts.target, outcome, 0, index, kind, code)
                counts.add(outcome, finding)
        counts.extra.update(
            p99_idle_us=round(p99(idle["latencies"]) * 1e6), p99_attacked_us=round(p99(attacked["latencies"]) * 1e6),
            idle_ok=idle["codes"].get("OK", 0), **{name: attacked["counts"][name] for name in SERVER_COUNTS},
        )  # fmt: skip
        assert counts.tried == calls and counts.extra["idle_ok"] == calls, (target, idle["codes"], attacked["codes"])
        rows.append(counts)
    return rows


def check(rows: list[Counts]) -> None:
    for counts in rows:
        assert counts.counts["ok"] == counts.tried, counts.summary()
        assert counts.extra["p99_attacked_us"] <= 2 * counts.extra["p99_idle_us"], (counts.target, counts.extra)


def run(tmp_path: Path, processes: Any, sizes: dict[str, int], calls: int, results: Callable[[Counts], None]) -> None:
    rows = record(run_attacks(processes, tmp_path / "token", sizes, calls), calls)
    for counts in rows:
        results(counts)
    check(rows)


def test_denial_of_service_quick(tmp_path: Path, processes: Any, reliability_results: Callable[[Counts], None]) -> None:
    run(tmp_path, processes, QUICK, 60, reliability_results)


@pytest.mark.reliability
def test_denial_of_service(tmp_path: Path, processes: Any, reliability_results: Callable[[Counts], None]) -> None:
    run(tmp_path, processes, DOS_FULL, 200, reliability_results)
