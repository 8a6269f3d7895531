"""The reliability suite: quick counts in the default run, full counts with `make reliability`.

Tests marked `reliability` (the full counts: >= 10,000 inputs per parser, >= 100 kill points) are skipped
unless the run selects them with ``-m reliability`` or sets ``LEROBOT_ROS_RELIABILITY=1`` (what
scripts/reliability.sh does). Every test records its counts with the `reliability_results` fixture; at the end
of the session they are printed as a table and written to bench/results/reliability.json (bench-style JSON),
findings (inputs that crashed, hung or lost data, with the traceback) to bench/results/reliability_findings.md.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_harness import BAD_OUTCOMES, OUTCOMES, Counts

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
_COLLECTED: list[Counts] = []


def full_run(config: pytest.Config) -> bool:
    return os.environ.get("LEROBOT_ROS_RELIABILITY") == "1" or "reliability" in (config.option.markexpr or "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if full_run(config):
        return
    skip = pytest.mark.skip(reason="full reliability counts: run `make reliability` (or pytest -m reliability)")
    for item in items:
        if item.get_closest_marker("reliability") is not None:
            item.add_marker(skip)


@pytest.fixture
def reliability_results() -> Any:
    """Call with a `Counts` to have it in the session's table and JSON."""
    return _COLLECTED.append


def table(rows: list[Counts]) -> str:
    head = ["target", "tried", "ok", "accepted with changed data", "clear error", "crash", "hang", "data lost"]
    body = [[c.target, str(c.tried), *(str(c.counts[o]) for o in OUTCOMES)] for c in rows]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in body]
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _COLLECTED:
        return
    rows = sorted(_COLLECTED, key=lambda c: c.target)
    terminalreporter.write_sep("=", "reliability counts")
    terminalreporter.write_line(table(rows))
    if not full_run(config):
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "reliability.json"
    # A run of some targets (make reliability ARGS="-k ...") updates those rows and keeps the others.
    previous = json.loads(path.read_text()).get("targets", []) if path.is_file() else []
    mine = {c.target for c in rows}
    kept = [t for t in previous if t.get("target") not in mine]
    result = {
        "bench": "reliability",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "targets": sorted([*kept, *(c.as_dict() for c in rows)], key=lambda t: t["target"]),
    }
    result["all_zero"] = all(t[o] == 0 for t in result["targets"] for o in BAD_OUTCOMES)
    path.write_text(json.dumps(result, indent=1) + "\n")
    findings = [f"# Reliability findings ({result['date']})\n"]
    for c in rows:
        for f in c.findings:
            findings.append(
                f"## {f.target}: {f.outcome} (seed {f.seed}, index {f.index})\n\ninput: {f.input}\n\n"
                f"reproduce: `.venv/bin/python tests/reliability/reproduce.py {f.target} {f.seed} {f.index}`\n\n"
                f"```\n{f.detail.strip()[-4000:]}\n```\n"
            )
    with (RESULTS / "reliability_findings.md").open("a") as out:
        out.write("\n".join(findings))
    terminalreporter.write_line(f"written: {RESULTS / 'reliability.json'}, {RESULTS / 'reliability_findings.md'}")
