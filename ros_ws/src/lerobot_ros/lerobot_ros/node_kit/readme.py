"""README parameter tables generated from the nodes' parameter tables.

A README names the table it shows in a marker line; the lines up to the closing marker are the rendered table::

    <!-- parameters: lerobot_drivers.nodes.arm_driver:ArmDriverParameters -->
    | parameter | type | default | range / choices | read-only | description |
    ...
    <!-- /parameters -->

`sections()` finds them, `render()` gives what belongs there, `update()` rewrites a README so it matches.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

from lerobot_ros.node_kit.parameters import ParameterTable

START = re.compile(r"^<!-- parameters: (?P<target>[\w.]+:\w+) -->$", re.MULTILINE)
END = "<!-- /parameters -->"


@dataclasses.dataclass(frozen=True)
class Section:
    """One generated table in a README: what it names and the text it holds now."""

    target: str
    start: int  # offset of the first character after the start marker's line
    end: int  # offset of the end marker
    text: str


def load_table(target: str) -> ParameterTable[object]:
    """The table of `module:ConfigClass` (imports the module)."""
    module_name, _, attr = target.partition(":")
    try:
        config_type = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise LookupError(f"cannot load parameter table {target}: {err}") from None
    table: ParameterTable[object] = ParameterTable.of(config_type)
    return table


def render(target: str) -> str:
    """The Markdown table of `target`, as it stands between the markers."""
    return load_table(target).markdown() + "\n"


def sections(text: str, where: str = "README") -> list[Section]:
    found = []
    for match in START.finditer(text):
        start = match.end() + 1
        end = text.find(END, start)
        if end < 0:
            raise ValueError(f"{where}: {match.group(0)} has no closing {END}")
        found.append(Section(match.group("target"), start, end, text[start:end]))
    return found


def update(path: Path, *, write: bool) -> list[str]:
    """The targets whose section in `path` differs from its table; with `write`, the file is fixed."""
    text = path.read_text(encoding="utf-8")
    stale = []
    for section in reversed(sections(text, str(path))):
        expected = render(section.target)
        if section.text != expected:
            stale.append(section.target)
            text = text[: section.start] + expected + text[section.end :]
    if stale and write:
        path.write_text(text, encoding="utf-8")
    return list(reversed(stale))
