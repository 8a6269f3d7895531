"""Which package may import which: the data path (topics -> contract -> dataset -> trainer -> checkpoint -> policy
-> executor -> driver) as a straight line, read from the sources' import statements (no package is imported).

`lerobot_msgs` (generated interfaces) and third-party packages are free for everyone. "lazy" imports sit inside
a function: they load only when that function runs (a command's body, an optional backend), so a package stays
importable without the one above it. No edge may be added against the data path.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "lerobot_ros": ROOT / "ros_ws/src/lerobot_ros/lerobot_ros",
    "lerobot_contract": ROOT / "ros_ws/src/lerobot_contract/lerobot_contract",
    "lerobot_drivers": ROOT / "ros_ws/src/lerobot_drivers/lerobot_drivers",
    "lerobot_recorder": ROOT / "ros_ws/src/lerobot_recorder/lerobot_recorder",
    "lerobot_training": ROOT / "training/lerobot_training",
    "lerobot_policy_server": ROOT / "policy_server/lerobot_policy_server",
    "lerobot_policy_node": ROOT / "ros_ws/src/lerobot_policy_node/lerobot_policy_node",
    "lerobot_sim_bridge": ROOT / "sim_bridge/lerobot_sim_bridge",
    "lerobot_eval": ROOT / "ros_ws/src/lerobot_eval/lerobot_eval",
}
# package -> {imported package: "module" (anywhere) | "lazy" (inside functions only)}
ALLOWED: dict[str, dict[str, str]] = {
    "lerobot_ros": {},
    # The shared data model: the contract, the alignment rule, the live sampler, the frame decoder.
    "lerobot_contract": {"lerobot_ros": "module"},  # image decoding (lerobot_ros.images)
    "lerobot_drivers": {"lerobot_ros": "module"},
    "lerobot_recorder": {"lerobot_ros": "module", "lerobot_contract": "module"},
    "lerobot_training": {"lerobot_ros": "module", "lerobot_recorder": "lazy"},
    "lerobot_policy_server": {"lerobot_ros": "module", "lerobot_training": "lazy"},
    "lerobot_policy_node": {
        "lerobot_ros": "module",
        "lerobot_contract": "module",
        "lerobot_recorder": "lazy",  # the dataset reader of `lerobot-ros replay`
        "lerobot_training": "lazy",  # the checkpoint loader and policy classes, when a policy is loaded (errors: below)
        "lerobot_policy_server": "lazy",  # the gRPC client, when the policy runs on a server
        "lerobot_drivers": "lazy",  # the arms' calibrated limits, when a robot_config is given
    },
    "lerobot_sim_bridge": {
        "lerobot_ros": "module",
        "lerobot_drivers": "module",  # the arm's position controller, the same as on the real arm
        "lerobot_contract": "module",
    },
    # `lerobot-ros eval` and `lerobot-ros demo`: above everything they drive (nothing imports them).
    "lerobot_eval": {
        "lerobot_ros": "module",
        "lerobot_contract": "module",
        "lerobot_recorder": "module",
        "lerobot_training": "module",
        "lerobot_policy_node": "module",
        "lerobot_sim_bridge": "module",
    },
}

# Modules of a "lazy" package that may be imported at module level: pure, loading nothing heavy.
MODULE_LEVEL: dict[str, set[str]] = {
    "lerobot_policy_node": {"lerobot_training.errors"},  # PolicyConfigError: one class for training and the node
}


def _imports(package: str) -> dict[tuple[str, str], list[str]]:
    """(imported package, "module" | "lazy") -> where, for every import of another of our packages."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGES[package].rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        top_level = {id(node) for node in tree.body}
        # Imports under a module-level `if TYPE_CHECKING:` do not run.
        typing_only = {
            id(child)
            for node in tree.body
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for child in ast.walk(node)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # relative: inside the package
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                target = name.split(".")[0]
                if target in PACKAGES and target != package:
                    kind = "module" if id(node) in top_level else "lazy"
                    if name in MODULE_LEVEL.get(package, set()):
                        kind = "lazy"  # allowed at module level, counted as the package's lazy imports
                    where = f"{path.relative_to(ROOT)}:{node.lineno} {name}"
                    found.setdefault((target, kind), []).append(where)
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_imports_only_what_is_below_it(package: str) -> None:
    allowed = ALLOWED[package]
    wrong = []
    for (target, kind), where in sorted(_imports(package).items()):
        permitted = allowed.get(target)
        if permitted is None or (permitted == "lazy" and kind == "module"):
            wrong.append(f"{package} imports {target} ({kind}) at {', '.join(where)}")
    assert not wrong, "import against the data path's direction:\n" + "\n".join(wrong)


def test_every_package_is_in_the_table() -> None:
    on_disk = {p.parent.name for p in (ROOT / "ros_ws/src").glob("*/*/__init__.py")}
    on_disk |= {p.parent.name for p in ROOT.glob("*/lerobot_*/__init__.py")}
    assert on_disk <= set(PACKAGES), f"packages missing from the import table: {sorted(on_disk - set(PACKAGES))}"
    assert set(ALLOWED) == set(PACKAGES)
