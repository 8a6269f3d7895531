"""MkDocs hooks: the generated reference and benchmark pages (scripts/docs_gen.py) join the site at build time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_gen import all_pages

_PAGES: dict[str, str] = {}


def _titled(prefix: str) -> list[dict[str, str] | str]:
    """Nav entries of the generated pages under `prefix`, index first."""
    paths = sorted(p for p in _PAGES if p.startswith(prefix))
    index = [p for p in paths if p.endswith("/index.md")]
    rest = [p for p in paths if not p.endswith("/index.md")]
    return [*index, *({Path(p).stem: p} for p in rest)]


def on_config(config: Any) -> Any:
    _PAGES.clear()
    _PAGES.update(all_pages())
    generated = {
        "Command line": _titled("reference/cli/"),
        "Node parameters": _titled("reference/nodes/"),
        "Benchmarks": _titled("benchmarks/"),
    }
    for section in config.nav or []:
        if not isinstance(section, dict):
            continue
        for title, entries in section.items():
            if not isinstance(entries, list):
                continue
            for i, entry in enumerate(entries):
                if isinstance(entry, str) and entry.startswith("generated:"):
                    entries[i] = {entry.removeprefix("generated:"): generated[entry.removeprefix("generated:")]}
            if title in generated and entries == ["generated"]:
                section[title] = generated[title]
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for rel, text in _PAGES.items():
        files.append(File.generated(config, rel, content=text))
    return files
