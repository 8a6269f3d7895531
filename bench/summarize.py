"""Collect every bench/results/*.json into summary.json and a Markdown table.

Each benchmark writes one JSON object. Numeric leaves are listed by their dotted path; a figure
whose object also holds `baseline` and/or `target` keys is shown next to them, e.g.
`{"frames_per_s": {"value": 812.0, "baseline": 301.0, "target": ">= 2x baseline", "unit": "frames/s"}}`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def figures(data: Any, prefix: str = "") -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if isinstance(data, dict):
        if "value" in data and isinstance(data["value"], (int, float)):
            rows.append(
                {
                    "figure": prefix,
                    "value": data["value"],
                    "unit": data.get("unit", ""),
                    "baseline": data.get("baseline", ""),
                    "target": data.get("target", ""),
                }
            )
            return rows
        for key, value in data.items():
            rows += figures(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        rows.append({"figure": prefix, "value": data, "unit": "", "baseline": "", "target": ""})
    return rows


def main(results_dir: str) -> int:
    root = Path(results_dir)
    summary: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(root.glob("*.json")):
        if path.name == "summary.json":
            continue
        summary[path.stem] = figures(json.loads(path.read_text()))
    (root / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = ["# Benchmark summary", ""]
    for bench, rows in summary.items():
        lines += [f"## {bench}", "", "| figure | value | unit | baseline | target |", "|---|---|---|---|---|"]
        lines += [f"| {r['figure']} | {r['value']:.4g} | {r['unit']} | {r['baseline']} | {r['target']} |" for r in rows]
        lines.append("")
    (root / "summary.md").write_text("\n".join(lines))
    print(f"wrote {root / 'summary.md'} ({sum(len(r) for r in summary.values())} figures from {len(summary)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results"))
