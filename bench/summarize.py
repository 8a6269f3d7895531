"""Collect the benchmarks' result files into bench/results/summary.json and summary.md.

Each benchmark `bench/bench_<name>.py` writes `<name>.json` or `<name>_<variant>.json` into the results
folder. Its top-level `headline` list (records from bench/headline.py) goes into one table of every
benchmark's headline figures, next to its same-run baseline, the ratio value / baseline, its target and
whether the target is met; every other numeric leaf goes into a per-benchmark detail table (a leaf object
with a numeric `value` is one figure, shown with its `unit`, `baseline` and `target` keys).

summary.json: {"run": {date, machine, load average at start/end, commit, arguments},
               "benches": {<result file stem or bench name>: {"bench", "status", "exit_status", "headline",
                                                              "figures", "problems"}}}
A benchmark with no result file (failed, or older than --since) is listed with status "no result".

With --publish DIR, every result file of this run is also copied into DIR (the docs site's
docs/benchmarks/results/) with the run's date, commit, machine and load as its "published_run": the benchmark
pages of the site show it.

Usage: python bench/summarize.py [RESULTS_DIR] [--since EPOCH] [--status NAME=EXIT ...]
                                 [--loadavg-start "1.0 0.8 0.5"] [--args "--quick"] [--benches NAME ...]
                                 [--publish DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from headline import TargetError, number, ratio, target_met

BENCH_DIR = Path(__file__).resolve().parent
NOT_RESULTS = {"summary.json"}


def bench_names(bench_dir: Path = BENCH_DIR) -> list[str]:
    """`<name>` of every bench/bench_<name>.py."""
    return sorted(path.stem.removeprefix("bench_") for path in bench_dir.glob("bench_*.py"))


def owner(stem: str, names: list[str]) -> str | None:
    """The benchmark that writes `<stem>.json`: `<name>` or `<name>_<variant>`, the longest name that fits."""
    fitting = [name for name in names if stem == name or stem.startswith(f"{name}_")]
    return max(fitting, key=len) if fitting else None


def details(data: Any, prefix: str = "") -> list[dict[str, Any]]:
    """Every numeric leaf by its dotted path (list items as [i]); an object with a numeric `value` is one figure."""
    rows: list[dict[str, Any]] = []
    if isinstance(data, dict):
        if number(data.get("value")) is not None:
            return [
                {
                    "figure": prefix,
                    "value": data["value"],
                    "unit": data.get("unit", ""),
                    "baseline": data.get("baseline", ""),
                    "target": data.get("target", ""),
                }
            ]
        for key, value in data.items():
            if not prefix and key == "headline":
                continue
            rows += details(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            rows += details(value, f"{prefix}[{index}]")
    elif number(data) is not None:
        rows.append({"figure": prefix, "value": data, "unit": "", "baseline": "", "target": ""})
    return rows


def headline(data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The checked headline records of one result (with `ratio` added), and what was wrong with the others."""
    raw = data.get("headline")
    if raw is None:
        return [], []
    if isinstance(raw, dict):
        raw = [{"figure": key, **entry} if isinstance(entry, dict) else entry for key, entry in raw.items()]
    if not isinstance(raw, list):
        return [], [f"headline is a {type(raw).__name__}, not a list of figures"]
    rows, problems = [], []
    for index, entry in enumerate(raw):
        problem = _headline_problem(entry)
        if problem:
            problems.append(f"headline[{index}]: {problem}")
            continue
        row = {key: entry.get(key) for key in ("figure", "value", "unit", "baseline", "baseline_what", "target")}
        row["unit"] = row["unit"] or ""
        try:
            computed = target_met(row["value"], row["baseline"], row["target"])
        except TargetError as err:
            problems.append(f"headline[{index}] ({row['figure']}): {err}")
            computed = None
        if "met" in entry and entry["met"] != computed:
            problems.append(f"headline[{index}] ({row['figure']}): met recorded as {entry['met']}, computed {computed}")
        row["met"] = computed
        row["ratio"] = ratio(row["value"], row["baseline"])
        rows.append(row)
    return rows, problems


def _headline_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return f"not an object: {entry!r}"
    if not isinstance(entry.get("figure"), str) or not entry["figure"]:
        return "no 'figure' name"
    for key in ("value", "baseline"):
        if entry.get(key) is not None and number(entry[key]) is None:
            return f"{entry['figure']}: {key} {entry[key]!r} is not a number"
    for key in ("unit", "baseline_what", "target"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            return f"{entry['figure']}: {key} {entry[key]!r} is not text"
    if entry.get("met") is not None and not isinstance(entry["met"], bool):
        return f"{entry['figure']}: met {entry['met']!r} is not true/false/null"
    return None


def load_result(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return {"status": "unreadable", "headline": [], "figures": [], "problems": [f"{path.name}: {err}"]}
    if not isinstance(data, dict):
        problem = f"{path.name}: top level is a {type(data).__name__}, not an object"
        return {"status": "unreadable", "headline": [], "figures": [], "problems": [problem]}
    rows, problems = headline(data)
    return {"status": "ok", "headline": rows, "figures": details(data), "problems": problems}


def collect(results: Path, names: list[str], since: float | None, statuses: dict[str, int]) -> dict[str, Any]:
    """One entry per result file written since `since`, and a "no result" entry per benchmark without one."""
    files = [
        path
        for path in sorted(results.glob("*.json"))
        if path.name not in NOT_RESULTS and (since is None or path.stat().st_mtime >= since)
    ]
    benches: dict[str, Any] = {}
    for name in names:
        mine = [path for path in files if owner(path.stem, names) == name]
        if not mine:
            benches[name] = {"bench": name, "status": "no result", "exit_status": statuses.get(name)}
            benches[name].update(headline=[], figures=[], problems=[])
        for path in mine:
            benches[path.stem] = {"bench": name, "file": path.name, "exit_status": statuses.get(name)}
            benches[path.stem].update(load_result(path))
    for path in files:
        if owner(path.stem, names) is None:
            benches[path.stem] = {"bench": None, "file": path.name, "exit_status": None, **load_result(path)}
    return benches


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def commit(repo: Path) -> str:
    """The checked-out commit, and whether tracked files differ from it."""

    def git(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True, check=False)

    try:
        head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="seconds")


def cell(value: Any) -> str:
    """Markdown table cell text: numbers to 4 significant digits (whole from 10000), missing as an en dash."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, (int, float)):
        return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(run: dict[str, Any], benches: dict[str, Any]) -> str:
    headlines = [row for entry in benches.values() for row in entry["headline"]]
    verdicts = [row["met"] for row in headlines if row["target"] is not None]
    missing = [key for key, entry in benches.items() if entry["status"] != "ok"]
    lines = [
        "# Benchmark summary",
        "",
        f"- run: {run['started'] or 'start not recorded'} to {run['finished']} (UTC), "
        f"`{' '.join(['scripts/bench.sh', run['args']]).strip()}`, commit {run['commit']}",
        f"- machine: {run['cpus']} CPUs, {run['platform']}, Python {run['python']}; load average (1/5/15 min) "
        f"at start {run['loadavg_start']}, at the end {run['loadavg_end']}",
        f"- targets: {verdicts.count(True)} met, {verdicts.count(False)} not met, {verdicts.count(None)} undecided "
        f"(value or baseline missing), of {len(verdicts)} figures with a target; "
        + (f"no result from: {', '.join(missing)}" if missing else "every benchmark wrote a result"),
        "",
        "## Headline figures",
        "",
        "| bench | figure | value | unit | baseline (what) | value / baseline | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, entry in benches.items():
        if entry["status"] != "ok":
            why = [] if entry["status"] == "no result" else ["result file unreadable"]
            exit_status = entry["exit_status"]
            why.append(f"exit status {exit_status}" if exit_status is not None else "exit status not recorded")
            lines.append(f"| {cell(key)} | **no result** ({', '.join(why)}) | | | | | | |")
            continue
        if not entry["headline"]:
            lines.append(f"| {cell(key)} | no headline figures (see the details) | | | | | | |")
        for row in entry["headline"]:
            baseline = cell(row["baseline"]) + (f" ({cell(row['baseline_what'])})" if row["baseline_what"] else "")
            met = "–" if row["target"] is None else "undecided" if row["met"] is None else cell(row["met"])
            lines.append(
                f"| {cell(key)} | {cell(row['figure'])} | {cell(row['value'])} | {cell(row['unit'])} | {baseline} "
                f"| {cell(row['ratio'])} | {cell(row['target'])} | {met} |"
            )
    problems = [f"- {key}: {problem}" for key, entry in benches.items() for problem in entry["problems"]]
    if problems:
        lines += ["", "Problems in the result files:", "", *problems]
    lines += ["", "## Details"]
    for key, entry in benches.items():
        if entry["status"] != "ok":
            continue
        lines += ["", f"### {key}", ""]
        if not entry["figures"]:
            lines.append("No numeric figures besides the headline.")
            continue
        lines += ["| figure | value | unit | baseline | target |", "|---|---|---|---|---|"]
        lines += [
            f"| {cell(r['figure'])} | {cell(r['value'])} | {cell(r['unit'])} | {cell(r['baseline'])} "
            f"| {cell(r['target'])} |"
            for r in entry["figures"]
        ]
    return "\n".join(lines) + "\n"


def publish(results: Path, benches: dict[str, Any], run: dict[str, Any], folder: Path) -> None:
    """Copy each result file of this run into `folder` with the run's facts as its "published_run"."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in benches.values():
        if entry.get("status") != "ok" or not entry.get("file"):
            continue
        data = json.loads((results / entry["file"]).read_text())
        data["published_run"] = {**run, "date": run["finished"]}
        (folder / entry["file"]).write_text(json.dumps(data, indent=1) + "\n")
        print(f"published {folder / entry['file']}")


def parse_status(text: str) -> tuple[str, int]:
    name, _, code = text.partition("=")
    if not name or not code.lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"--status takes NAME=EXIT, got {text!r}")
    return name, int(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=BENCH_DIR / "results", help="results folder")
    parser.add_argument("--since", type=float, help="ignore result files older than this (seconds since the epoch)")
    parser.add_argument("--status", type=parse_status, action="append", default=[], help="NAME=EXIT of a bench")
    parser.add_argument("--loadavg-start", default="not recorded", help="/proc/loadavg at the start of the run")
    parser.add_argument("--args", default="", help="the arguments the benchmarks ran with")
    parser.add_argument("--benches", nargs="+", help="benchmark names (default: every bench/bench_<name>.py)")
    parser.add_argument("--publish", type=Path, help="also copy this run's results here for the docs site")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(f"no results folder {args.results}")
    names = args.benches or bench_names()
    benches = collect(args.results, names, args.since, dict(args.status))
    run = {
        "started": iso(args.since) if args.since is not None else None,
        "finished": iso(datetime.datetime.now(datetime.timezone.utc).timestamp()),
        "args": args.args,
        "cpus": os.cpu_count(),
        "platform": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "loadavg_start": args.loadavg_start,
        "loadavg_end": loadavg(),
        "commit": commit(BENCH_DIR.parent),
    }
    (args.results / "summary.json").write_text(json.dumps({"run": run, "benches": benches}, indent=2) + "\n")
    (args.results / "summary.md").write_text(markdown(run, benches))
    if args.publish is not None:
        publish(args.results, benches, run, args.publish)
    figures = sum(len(entry["headline"]) for entry in benches.values())
    print(f"wrote {args.results / 'summary.md'} ({figures} headline figures, {len(benches)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
