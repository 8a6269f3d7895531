"""The project's one YAML loader: aliases bounded, and every YAML file the project reads goes through it.

Issue #38: a contract of a few nested anchors (a "billion laughs") kept bag2dataset busy for minutes while its
memory grew, until it was killed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from lerobot_ros.bounded_yaml import MAX_EXPANDED, YamlLimitError, expanded_size, load_yaml

REPO = Path(__file__).resolve().parents[2]


def billion_laughs(levels: int = 9, key: str = "lol") -> str:
    """`levels` lists of 9 aliases of the list before: 9**levels strings once expanded, ~1 KB of YAML."""
    lines = [f"{key}0: &{key}0 [" + ", ".join(['"lol"'] * 9) + "]"]
    for i in range(1, levels):
        lines.append(f"{key}{i}: &{key}{i} [" + ", ".join([f"*{key}{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_is_refused_with_a_one_line_yaml_error() -> None:
    with pytest.raises(YamlLimitError) as caught:
        load_yaml(billion_laughs())
    assert isinstance(caught.value, yaml.YAMLError)  # existing `except yaml.YAMLError` handlers report it
    assert "\n" not in str(caught.value) and "aliases" in str(caught.value)


def test_small_aliases_and_merge_keys_still_load() -> None:
    text = "defaults: &defaults {rate: 30, depth: 5}\nfront: {<<: *defaults, depth: 1}\nwrist: *defaults\n"
    assert load_yaml(text) == {
        "defaults": {"rate": 30, "depth": 5},
        "front": {"rate": 30, "depth": 1},
        "wrist": {"rate": 30, "depth": 5},
    }
    assert load_yaml(billion_laughs(levels=3)) == yaml.safe_load(billion_laughs(levels=3))


def test_the_expansion_is_measured_without_expanding() -> None:
    node = yaml.compose(billion_laughs(levels=5))
    assert node is not None
    # 9**4 strings of 3 characters in the last list alone; shared nodes are measured once.
    assert expanded_size(node) > 9**4 * 4
    assert expanded_size(yaml.compose(billion_laughs(levels=12)) or node) == MAX_EXPANDED + 1


@pytest.mark.parametrize(
    ("text", "needle"),
    [("&a [1, *a]\n", "refers to the mapping or list that holds it"), ("[" * 3000 + "]" * 3000, "nested too deeply")],
)
def test_recursive_and_very_deep_documents_are_refused(text: str, needle: str) -> None:
    with pytest.raises(YamlLimitError, match=needle):
        load_yaml(text)


def _contract_with_a_bomb(tmp_path: Path) -> Path:
    """The shipped SO-101 contract whose free-form `description` holds a billion laughs (what the converter then
    copies into the dataset's meta)."""
    text = (REPO / "config" / "contracts" / "so101.yaml").read_text()
    bomb = "".join(f"  - {line.split(': ', 1)[1]}\n" for line in billion_laughs(key="x").splitlines())
    path = tmp_path / "contract.yaml"
    path.write_text(re.sub(r"(?m)^description: .*\n", "", text) + "description:\n" + bomb)
    return path


def test_a_contract_with_a_billion_laughs_is_a_contract_error(tmp_path: Path) -> None:
    from lerobot_contract import Contract, ContractError

    with pytest.raises(ContractError, match="aliases") as caught:
        Contract.load(_contract_with_a_bomb(tmp_path))
    assert "\n" not in str(caught.value)


def test_a_robot_config_with_a_billion_laughs_is_a_config_error(tmp_path: Path) -> None:
    from lerobot_policy_node.core.errors import PolicyConfigError
    from lerobot_policy_node.core.robot_limits import load_robot_limits

    path = tmp_path / "robot.yaml"
    path.write_text(billion_laughs())
    with pytest.raises(PolicyConfigError, match="aliases"):
        load_robot_limits(path, "/follower/action_executor")


def test_a_launch_file_with_a_billion_laughs_is_a_launch_error(tmp_path: Path) -> None:
    from lerobot_ros.launch.entities import read_launch_file
    from lerobot_ros.launch.errors import LaunchError

    path = tmp_path / "bomb.launch.yaml"
    path.write_text(billion_laughs() + "launch: []\n")
    with pytest.raises((LaunchError, ValueError), match="aliases"):
        read_launch_file(path)


def test_a_checkpoint_contract_with_a_billion_laughs_is_a_checkpoint_error(tmp_path: Path) -> None:
    from lerobot_training.checkpoint import CheckpointError, _read_contract

    (tmp_path / "contract.yaml").write_text(billion_laughs())
    with pytest.raises(CheckpointError, match="aliases"):
        _read_contract(tmp_path, {"contract": "contract.yaml"}, tmp_path / "lerobot_ros.json")


def test_the_policy_servers_contract_read_is_bounded(tmp_path: Path) -> None:
    from lerobot_policy_server.backends import LoadError, _project_metadata

    (tmp_path / "lerobot_ros.json").write_text(json.dumps({"fps": 30}))
    (tmp_path / "contract.yaml").write_text(billion_laughs())
    with pytest.raises(LoadError, match="aliases"):
        _project_metadata(tmp_path)


SHIPPED = ["ros_ws/src", "training", "policy_server", "sim_bridge", "lerobot_plugins", "launch", "scripts"]


def test_no_shipped_module_loads_yaml_around_the_bounded_loader() -> None:
    """Every YAML the project reads goes through lerobot_ros.bounded_yaml (a new yaml.safe_load would not)."""
    pattern = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(")
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for top in SHIPPED
        for path in (REPO / top).rglob("*.py")
        if path.name != "bounded_yaml.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
