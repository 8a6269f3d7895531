"""bench/summarize.py turns the benchmarks' result files into one headline table and per-benchmark details."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SUMMARIZE = REPO / "bench" / "summarize.py"
BENCHES = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]


def load_headline_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_headline", REPO / "bench" / "headline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


headline = load_headline_module()

ALPHA = {
    "headline": [
        headline.figure(
            "throughput",
            60.0,
            "frames/s",
            baseline=10.0,
            baseline_what="PNG then batch encode",
            target=">= 2x baseline (issue)",
        ),
        headline.figure("jitter p99", 1.5, "ms", target="<= 1 ms"),
        headline.figure("speedup without its baseline", 3.0, "x", target=">= 2x baseline"),
        headline.figure("latency p50", 7.25, "ms"),
    ],
    "throughput": {"value": 60.0, "unit": "frames/s", "baseline": 10.0},
    "runs": [{"p50": 3.0, "label": "text is not a figure"}],
}
ZETA = {
    "headline": [
        {"figure": "speed", "value": "fast", "unit": "x"},
        {"figure": "odd target", "value": 2.0, "unit": "x", "target": "about 2"},
        {"figure": "claims met", "value": 1.0, "unit": "x", "target": ">= 2", "met": True},
    ]
}


def summarize(results: Path, *extra: str) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, str(SUMMARIZE), str(results), "--benches", *BENCHES, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    data: dict[str, Any] = json.loads((results / "summary.json").read_text())
    return data


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The cells of every row of the first table after `heading`."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows[2:]  # header and separator


@pytest.fixture
def results(tmp_path: Path) -> Path:
    (tmp_path / "alpha.json").write_text(json.dumps(ALPHA))
    (tmp_path / "beta_quick.json").write_text(json.dumps({"frames_per_s": {"value": 41.5, "unit": "frames/s"}}))
    (tmp_path / "gamma.json").write_text('{"headline": [')  # a benchmark that died while writing
    (tmp_path / "zeta.json").write_text(json.dumps(ZETA))
    stale = tmp_path / "epsilon.json"
    stale.write_text(json.dumps(ALPHA))
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))
    return tmp_path


def test_summary_json_has_headline_ratios_and_met(results: Path) -> None:
    since = str(time.time() - 60)
    summary = summarize(results, "--since", since, "--status", "delta=1", "--status", "gamma=0", "--args=--quick")
    benches = summary["benches"]
    rows = {row["figure"]: row for row in benches["alpha"]["headline"]}
    assert rows["throughput"]["ratio"] == pytest.approx(6.0)
    assert rows["throughput"]["met"] is True
    assert rows["jitter p99"]["met"] is False
    assert rows["speedup without its baseline"]["met"] is None  # needs the baseline it does not have
    assert rows["latency p50"]["met"] is None and rows["latency p50"]["ratio"] is None
    details = {row["figure"]: row["value"] for row in benches["alpha"]["figures"]}
    assert details == {"throughput": 60.0, "runs[0].p50": 3.0}  # headline records are not repeated
    assert benches["beta_quick"]["bench"] == "beta" and benches["beta_quick"]["headline"] == []
    assert benches["gamma"]["status"] == "unreadable" and benches["gamma"]["exit_status"] == 0
    assert benches["delta"]["status"] == "no result" and benches["delta"]["exit_status"] == 1
    assert benches["epsilon"]["status"] == "no result"  # its file predates the run
    assert summary["run"]["args"] == "--quick"
    assert summary["run"]["cpus"] == os.cpu_count()


def test_malformed_headline_entries_are_reported_not_summarized(results: Path) -> None:
    zeta = summarize(results)["benches"]["zeta"]
    assert [row["figure"] for row in zeta["headline"]] == ["odd target", "claims met"]
    problems = " ".join(zeta["problems"])
    assert "'fast' is not a number" in problems
    assert "'about 2' is not '<op> <number>" in problems
    assert "met recorded as True, computed False" in problems
    assert zeta["headline"][1]["met"] is False  # computed from value and target, not taken from the file


def test_markdown_headline_table_then_details(results: Path) -> None:
    summarize(results, "--since", str(time.time() - 60), "--status", "delta=1", "--loadavg-start=0.50 0.40 0.30")
    markdown = (results / "summary.md").read_text()
    assert "load average (1/5/15 min) at start 0.50 0.40 0.30, at the end " in markdown
    assert "targets: 1 met, 2 not met, 2 undecided" in markdown  # alpha's and zeta's figures with a target
    rows = table_rows(markdown, "## Headline figures")
    by_figure = {(row[0], row[1]): row for row in rows}
    assert by_figure["alpha", "throughput"] == [
        "alpha",
        "throughput",
        "60",
        "frames/s",
        "10 (PNG then batch encode)",
        "6",
        ">= 2x baseline (issue)",
        "yes",
    ]
    assert by_figure["alpha", "jitter p99"][-1] == "**no**"
    assert by_figure["alpha", "speedup without its baseline"][-1] == "undecided"
    assert by_figure["alpha", "latency p50"][4:] == ["–", "–", "–", "–"]
    assert by_figure["beta_quick", "no headline figures (see the details)"]
    assert by_figure["delta", "**no result** (exit status 1)"]
    assert by_figure["gamma", "**no result** (result file unreadable, exit status not recorded)"]
    assert by_figure["epsilon", "**no result** (exit status not recorded)"]
    assert markdown.index("## Headline figures") < markdown.index("## Details") < markdown.index("### alpha")
    assert ["runs[0].p50", "3", "–", "–", "–"] in table_rows(markdown, "### alpha")
    assert ["frames_per_s", "41.5", "frames/s", "–", "–"] in table_rows(markdown, "### beta_quick")


@pytest.mark.parametrize(
    ("value", "baseline", "target", "met"),
    [
        (4.0, 2.0, ">= 2x baseline", True),
        (4.0, 2.0, "≥ 2× baseline", True),
        (4.5, None, ">= 4x real time", True),
        (3.9, 2.0, ">= 2x baseline", False),
        (0.9, 1.0, "<= baseline (the largest step inside)", True),
        (0.0, None, "== 0 s", True),
        (1.0, None, "< 1e-3", False),
        (None, 2.0, ">= 2", None),
        (float("nan"), None, "<= 2 ms", None),
        (1.0, None, None, None),
    ],
)
def test_target_met(value: float | None, baseline: float | None, target: str | None, met: bool | None) -> None:
    assert headline.target_met(value, baseline, target) is met


def test_figure_needs_to_say_what_its_baseline_is() -> None:
    with pytest.raises(ValueError, match="baseline_what"):
        headline.figure("throughput", 60.0, "frames/s", baseline=10.0)
    record = headline.figure("lag", float("nan"), "s", target="<= 1 s")
    assert record["value"] is None and record["met"] is None


def test_publish_copies_this_runs_results_with_the_run_for_the_docs_site(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "alpha.json").write_text(json.dumps(ALPHA))
    published = tmp_path / "published"
    summarize(results, "--publish", str(published))
    data = json.loads((published / "alpha.json").read_text())
    assert data["headline"] == ALPHA["headline"]
    run = data["published_run"]
    assert run["date"] and run["commit"] and run["cpus"] == os.cpu_count()
    assert not (published / "beta.json").exists()  # a benchmark without a result publishes nothing
