"""The policy server under denial of service from another host, beside an authorized client on a third.

Hostile round 4 (server with a token on a network-namespace address): 20 connections sending only the HTTP/2
preface locked the authorized client out for as long as they stayed; 20 silent TCP connections locked it out
for ~10 s; callers without the token took the 8 call slots (191 OK calls in 10 s became 44 OK + 9
RESOURCE_EXHAUSTED). Here (harness.ServerAndPeers: server, client and attacker namespaces, the client and the
attacker on links of their own) the authorized client makes its calls alone, then beside each attack; every call
must succeed and the p99 latency stay within twice the p99 alone. The policy's inference takes 20 ms (a sleep,
as a GPU-bound model leaves the CPU). The default run holds 20 connections / 8 callers for a few seconds; the
`reliability` variant (`make reliability`) holds 200 / 32 and records the figures in the reliability table.
"""

from __future__ import annotations

import json
import secrets
import sys

import numpy as np
import pytest
from harness import HERE, server_and_peers, unavailable

pytestmark = [pytest.mark.ros, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

DOS = str(HERE / "dos_peers.py")
CALLS = 60
QUICK = {"preface": 20, "silent": 20, "unauthenticated": 8}
FULL = {"preface": 200, "silent": 200, "unauthenticated": 32}


def p99(latencies: list[float]) -> float:
    return float(np.percentile(latencies, 99))


def run_attacks(tmp_path, processes, sizes: dict[str, int]) -> dict[str, dict]:
    """The authorized client's codes and latencies alone ("idle") and beside each attack of `sizes`."""
    token = tmp_path / "token"
    token.write_text(secrets.token_hex(16))
    results = {}
    with server_and_peers() as hosts:
        try:
            server = processes.start(
                hosts.command("server", [sys.executable, DOS, "server", str(token)]), name="server"
            )
            server.wait_for_output(r"serving \d+", timeout=120)

            def client(name: str) -> dict:
                argv = [sys.executable, DOS, "client", hosts.server_address["client"], str(token), str(CALLS)]
                run = processes.start(hosts.command("client", argv), name=name)
                assert run.wait(timeout=300) == 0, run.output()
                return json.loads(run.output().strip().splitlines()[-1])

            results["idle"] = client("client_idle")
            for kind, count in sizes.items():
                argv = [sys.executable, DOS, "attack", hosts.server_address["attacker"], kind, str(count), "600"]
                attacker = processes.start(hosts.command("attacker", argv), name=f"attack_{kind}")
                attacker.wait_for_output("attacking", timeout=120)
                results[kind] = client(f"client_{kind}")
                attacker.stop()
        finally:
            processes.stop_all()  # before the namespaces go
    return results


def check(results: dict[str, dict]) -> None:
    idle = p99(results["idle"]["latencies"])
    for kind, result in results.items():
        assert result["codes"] == {"OK": CALLS}, (kind, result["codes"])
        assert p99(result["latencies"]) <= 2 * idle, (kind, p99(result["latencies"]), idle)


FLOOD_OPEN = pytest.mark.xfail(
    reason="issue #38 open: beside 8 unauthenticated callers every call succeeds, but p99 was ~3x idle (92 vs 31 ms) "
    "on 2 shared cores",
    strict=False,
)


@pytest.mark.parametrize("kind", ["preface", "silent", pytest.param("unauthenticated", marks=FLOOD_OPEN)])
def test_an_authorized_client_is_served_beside_the_attack(tmp_path, processes, kind: str) -> None:
    results = run_attacks(tmp_path, processes, {kind: QUICK[kind]})
    check(results)
    counts = results[kind]["counts"]
    if kind == "unauthenticated":
        assert counts["refused_unauthenticated"] > 0 and counts["refused_busy"] == 0, counts
