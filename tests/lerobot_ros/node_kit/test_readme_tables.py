"""The README parameter tables are the nodes' own tables (regenerate: python -m lerobot_ros.node_kit readme --write)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lerobot_ros.node_kit.__main__ import main
from lerobot_ros.node_kit.readme import render, sections, update

REPO = Path(__file__).resolve().parents[3]
READMES = sorted([*REPO.glob("ros_ws/src/*/README.md"), REPO / "sim_bridge" / "README.md"])
TARGETS = [(path, s.target) for path in READMES for s in sections(path.read_text(encoding="utf-8"), str(path))]


@pytest.mark.parametrize(("readme", "target"), TARGETS, ids=[t for _, t in TARGETS])
def test_readme_section_matches_the_node_table(readme, target):
    text = readme.read_text(encoding="utf-8")
    (section,) = [s for s in sections(text) if s.target == target]
    assert section.text == render(target), (
        f"{readme.relative_to(REPO)}: the parameter table of {target} differs from the node's; "
        "regenerate it: .venv/bin/python -m lerobot_ros.node_kit readme --write <README>"
    )


def test_readme_command_checks_and_rewrites(tmp_path, capsys):
    target = "tests.lerobot_ros.node_kit.test_parameters:Example"
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
