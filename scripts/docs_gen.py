"""Reference pages of the documentation site, generated from the code at build time (never committed).

* `reference/cli/<command>.md`: every `lerobot-ros` sub-command's `--help` (nested sub-commands included),
  from the argparse parsers the CLI itself builds;
* `reference/nodes/<package>.<executable>.md`: every node executable's parameters, from its parameter
  dataclasses (the parameter kit's tables: type, default, range, read-only, description);
* `reference/launch.md`: every launch file and its arguments (name, default, description);
* `benchmarks/<name>.md`: one page per `bench/bench_<name>.py`: what it measures (its docstring), how to run
  it, and its published result (`docs/benchmarks/results/<name>*.json`, written by `scripts/bench.sh
  --publish`) with date, commit, machine and the same-run baseline of every headline figure, followed by
  `docs/benchmarks/notes/<name>.md` when it exists (measurements written up by hand: each with its date, commit,
  machine and same-run baseline); a notes file without a benchmark script is a page of its own.

`scripts/docs_hooks.py` hands these pages to MkDocs; `python scripts/docs_gen.py OUT` writes them into OUT to
read them without a build.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import dataclasses
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from lerobot_ros.bounded_yaml import load_yaml

ROOT = Path(__file__).resolve().parents[1]
AMENT_PACKAGES = sorted([*(ROOT / "ros_ws" / "src").iterdir(), ROOT / "sim_bridge"])
LAUNCH_DIRS = [ROOT / "launch", *(p / "launch" for p in AMENT_PACKAGES)]
BENCH_DIR = ROOT / "bench"
PUBLISHED = ROOT / "docs" / "benchmarks" / "results"
NOTES = ROOT / "docs" / "benchmarks" / "notes"
HELP_WIDTH = "100"


def _fence(text: str) -> str:
    return "```text\n" + text.rstrip() + "\n```\n"


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def _help_sections(parser: argparse.ArgumentParser, title: str, level: int) -> list[str]:
    parts = [f"{'#' * level} `{title}`\n", _fence(parser.format_help())]
    for name, sub in _subparsers(parser):
        parts += _help_sections(sub, f"{title} {name}", min(level + 1, 4))
    return parts


def cli_pages() -> dict[str, str]:
    """`reference/cli/<command>.md` for every `lerobot-ros` sub-command, and an index."""
    from lerobot_ros.cli import build_parser, load_commands

    os.environ["COLUMNS"] = HELP_WIDTH  # argparse wraps at the terminal's width: make the pages stable
    commands = load_commands()
    parser = build_parser(commands)
    pages: dict[str, str] = {}
    rows = []
    for name, sub in _subparsers(parser):
        command = commands[name]
        body = [
            f"# lerobot-ros {name}\n",
            f"{command.help}\n",
            *_help_sections(sub, f"lerobot-ros {name}", 2),
        ]
        pages[f"reference/cli/{name}.md"] = "\n".join(body)
        rows.append(f"| [`{name}`]({name}.md) | {command.help} |")
    index = [
        "# Command line: `lerobot-ros`\n",
        "One entry point for the stack's tools; each package contributes its own commands. "
        "Every page below is the command's own `--help`.\n",
        _fence(parser.format_help()),
        "| command | what it does |",
        "|---|---|",
        *rows,
        "",
    ]
    pages["reference/cli/index.md"] = "\n".join(index)
    return pages


def executables() -> list[tuple[str, str, str]]:
    """(package, executable, module) of every console script of the ament packages (what `ros2 run` runs)."""
    found = []
    for package in AMENT_PACKAGES:
        cfg = package / "setup.cfg"
        if not cfg.is_file():
            continue
        parser = configparser.ConfigParser()
        parser.read(cfg)
        scripts = parser.get("options.entry_points", "console_scripts", fallback="")
        for line in scripts.strip().splitlines():
            exe, _, target = (part.strip() for part in line.partition("="))
            if exe and target:
                found.append((package.name, exe, target.partition(":")[0]))
    return found


def parameter_tables(module_name: str) -> list[tuple[str, Any]]:
    """(class name, ParameterTable) of every parameter dataclass a node module defines or imports."""
    from lerobot_ros.node_kit.parameters import ParameterTable

    module = importlib.import_module(module_name)
    tables = []
    for name, value in sorted(vars(module).items()):
        if not (isinstance(value, type) and dataclasses.is_dataclass(value)):
            continue
        try:
            table = ParameterTable.of(value)
        except (TypeError, ValueError):
            continue  # a dataclass that is not a parameter table
        if table.names:
            tables.append((name, table))
    return tables


def node_pages() -> dict[str, str]:
    """`reference/nodes/<package>.<executable>.md` for every executable that declares parameters."""
    pages: dict[str, str] = {}
    rows = []
    for package, exe, module_name in executables():
        tables = parameter_tables(module_name)
        if not tables:
            continue
        doc = (importlib.import_module(module_name).__doc__ or "").strip()
        summary = doc.splitlines()[0] if doc else ""
        body = [
            f"# {package} / {exe}\n",
            f"{summary}\n" if summary else "",
            f"Run it with `ros2 run {package} {exe}` (on a ROS 2 install) or from a launch file "
            f"(`pkg: {package}, exec: {exe}`). Module: `{module_name}`.\n",
        ]
        for name, table in tables:
            body += [f"## {name}\n", table.markdown(), ""]
        page = f"reference/nodes/{package}.{exe}.md"
        pages[page] = "\n".join(body)
        rows.append(f"| [`{package}` / `{exe}`]({package}.{exe}.md) | {summary} |")
    pages["reference/nodes/index.md"] = "\n".join(
        [
            "# Node parameters\n",
            "Every node's parameters, generated from the dataclass the node declares them from (one table per "
            "node: type, default, allowed range or choices, whether it may change at run time).\n",
            "| node | what it is |",
            "|---|---|",
            *rows,
            "",
        ]
    )
    return pages


def _launch_args(path: Path) -> tuple[str, list[dict[str, str]]]:
    text = path.read_text()
    comments = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        comments.append(line.lstrip("# ").rstrip())
    args = []
    for entry in (load_yaml(text) or {}).get("launch", []) or []:
        if isinstance(entry, dict) and isinstance(entry.get("arg"), dict):
            arg = entry["arg"]
            args.append({k: str(arg.get(k, "")) for k in ("name", "default", "description")})
    return " ".join(c for c in comments if c and not c.startswith("lerobot-ros ")), args


def launch_page() -> dict[str, str]:
    """`reference/launch.md`: each launch file with its arguments."""
    seen: set[Path] = set()
    body = [
        "# Launch files\n",
        "Every launch file of the repository with its arguments. Run one with "
        "`lerobot-ros launch FILE name:=value ...` (or `ros2 launch` on a ROS 2 install); arguments without a "
        "default are required.\n",
    ]
    for folder in LAUNCH_DIRS:
        for path in sorted(folder.glob("*.launch.yaml")):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            about, args = _launch_args(path)
            body.append(f"## `{path.relative_to(ROOT)}`\n")
            if about:
                body.append(f"{about}\n")
            if args:
                body += ["| argument | default | description |", "|---|---|---|"]
                for arg in args:
                    default = _cell(f"`{arg['default']}`" if arg["default"] else "(required)")
                    body.append(f"| `{arg['name']}` | {default} | {_cell(arg['description'])} |")
                body.append("")
            else:
                body.append("No arguments.\n")
    return {"reference/launch.md": "\n".join(body)}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def _published(name: str) -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in sorted(PUBLISHED.glob(f"{name}*.json")):
        stem = path.stem
        if stem == name or (stem.startswith(name + "_") and not (BENCH_DIR / f"bench_{stem}.py").is_file()):
            found.append((path, json.loads(path.read_text())))
    return found


def bench_pages() -> dict[str, str]:
    """`benchmarks/<name>.md` for every bench/bench_<name>.py, and an index."""
    pages: dict[str, str] = {}
    rows = []
    for script in sorted(BENCH_DIR.glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        doc = ast.get_docstring(ast.parse(script.read_text())) or ""
        title = doc.splitlines()[0] if doc else name
        body = [
            f"# {name}\n",
            f"{title}\n",
            "## What it measures\n",
            _fence("\n".join(doc.splitlines()[1:]).strip() or title),
            "## How to run it\n",
            f"`.venv/bin/python bench/{script.name}` (add `--help` for its options), or every benchmark with "
            "`make bench`; results are written to `bench/results/`. `scripts/bench.sh --publish` also copies them "
            "here.\n",
            "## Last published result\n",
        ]
        published = _published(name)
        if not published:
            body.append("None published yet: run it and publish with `scripts/bench.sh --publish`.\n")
        for path, data in published:
            run = data.get("published_run", {})
            body.append(f"### `{path.name}`\n")
            body.append(
                f"- date: {run.get('date', data.get('date', 'unknown'))}; commit: {run.get('commit', 'unknown')}\n"
                f"- machine: {run.get('cpus', '?')} CPUs, {run.get('platform', 'unknown platform')}; load average "
                f"at start {run.get('loadavg_start', '?')}, at end {run.get('loadavg_end', '?')}\n"
            )
            headline = data.get("headline") or []
            if headline:
                body += [
                    "| figure | value | unit | baseline (same run) | baseline is | target | met |",
                    "|---|---|---|---|---|---|---|",
                ]
                for fig in headline:
                    body.append(
                        "| "
                        + " | ".join(
                            _cell(fig.get(k))
                            for k in ("figure", "value", "unit", "baseline", "baseline_what", "target", "met")
                        )
                        + " |"
                    )
                body.append("")
            else:
                body.append("This result has no headline figures; the full JSON is in the repository.\n")
        notes = NOTES / f"{name}.md"
        if notes.is_file():
            body += ["## Measurements written up\n", notes.read_text()]
        pages[f"benchmarks/{name}.md"] = "\n".join(body)
        rows.append(f"| [{name}]({name}.md) | {title} | {'yes' if published or notes.is_file() else 'not yet'} |")
    for notes in sorted(NOTES.glob("*.md")):
        if f"benchmarks/{notes.stem}.md" not in pages:
            text = notes.read_text()
            pages[f"benchmarks/{notes.stem}.md"] = text
            title = text.splitlines()[0].lstrip("# ") if text else notes.stem
            rows.append(f"| [{notes.stem}]({notes.stem}.md) | {title} | yes |")
    pages["benchmarks/index.md"] = "\n".join(
        [
            "# Benchmarks\n",
            "Each benchmark measures against a baseline in the same run and reports the ratio; a page shows what "
            "it measures, how to run it and its last published result with the date, commit and machine.\n",
            "| benchmark | what | published |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )
    return pages


def all_pages() -> dict[str, str]:
    """Every generated page, by its path under docs/."""
    return {**cli_pages(), **node_pages(), **launch_page(), **bench_pages()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the documentation site's generated pages into a folder.")
    parser.add_argument("out", type=Path, help="folder to write the pages into")
    args = parser.parse_args(argv)
    for rel, text in all_pages().items():
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    sys.stdout.write(f"wrote {len(all_pages())} pages into {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
