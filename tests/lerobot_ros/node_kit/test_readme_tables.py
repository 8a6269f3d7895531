"""The README parameter tables are the nodes' own tables (regenerate: python -m lerobot_ros.node_kit readme --write)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lerobot_ros.node_kit.__main__ import main
from lerobot_ros.node_kit.readme import render, sections, update

REPO = Path(__file__).resolve().parents[3]
# The package pages of the documentation site (and any README that still holds a table).
READMES = sorted(
    [*REPO.glob("docs/packages/*.md"), *REPO.glob("ros_ws/src/*/README.md"), REPO / "sim_bridge" / "README.md"]
)
TARGETS = [(path, s.target) for path in READMES for s in sections(path.read_text(encoding="utf-8"), str(path))]


@pytest.mark.parametrize(("readme", "target"), TARGETS, ids=[t for _, t in TARGETS])
def test_readme_section_matches_the_node_table(readme, target):
    text = readme.read_text(encoding="utf-8")
    (section,) = [s for s in sections(text) if s.target == target]
    assert section.text == render(target), (
        f"{readme.relative_to(REPO)}: the parameter table of {target} differs from the node's; "
        "regenerate it: .venv/bin/python -m lerobot_ros.node_kit readme --write <README>"
    )


def test_readme_command_checks_and_rewrites(tmp_path, capsys, monkeypatch):
    (tmp_path / "kit_example_node.py").write_text(
        "from dataclasses import dataclass\n"
        "from lerobot_ros.node_kit.parameters import param\n\n\n"
        "@dataclass(frozen=True)\n"
        "class ExampleParameters:\n"
        "    rate: float = param(2.0, 'rate (Hz)', low=0.1, high=10.0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    target = "kit_example_node:ExampleParameters"
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n<!-- parameters: {target} -->\n| old |\n<!-- /parameters -->\n\nafter\n")
    assert main(["readme", str(readme)]) == 1
    assert f"stale the parameter table of {target}" in capsys.readouterr().err
    assert main(["readme", "--write", str(readme)]) == 0
    assert update(readme, write=False) == []
    assert readme.read_text().endswith(f"{render(target)}<!-- /parameters -->\n\nafter\n")
    assert main(["markdown", target]) == 0 and capsys.readouterr().out == render(target)
    assert main(["markdown", "no.such.module:X"]) == 1
    assert "cannot load parameter table no.such.module:X" in capsys.readouterr().err


def _package_sources():
    for root in [*REPO.glob("ros_ws/src/*"), REPO / "sim_bridge"]:
        for path in root.glob("*/**/*.py"):
            if "node_kit" not in path.parts and "__pycache__" not in path.parts:
                yield root, path


def test_every_node_declares_its_parameters_through_its_table():
    """No node declares a parameter by hand (declare_parameter / ParameterDescriptor): the table does it."""
    by_hand = [
        str(path.relative_to(REPO))
        for _, path in _package_sources()
        if "declare_parameter(" in (text := path.read_text(encoding="utf-8")) or "ParameterDescriptor(" in text
    ]
    assert by_hand == []


def test_every_parameter_table_is_shown_in_a_readme():
    tables = []
    for root, path in _package_sources():
        text = path.read_text(encoding="utf-8")
        if "lerobot_ros.node_kit.parameters import" not in text:
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        tables += [f"{module}:{name}" for name in re.findall(r"^class (\w+Parameters):", text, re.MULTILINE)]
    assert len(tables) >= 15
    shown = {target for _, target in TARGETS}
    assert sorted(set(tables) - shown) == [], "add a <!-- parameters: MODULE:CLASS --> section to the README"
