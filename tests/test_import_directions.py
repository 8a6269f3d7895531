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
    "lerobot_dataset": ROOT / "ros_ws/src/lerobot_dataset/lerobot_dataset",
    "lerobot_bags": ROOT / "ros_ws/src/lerobot_bags/lerobot_bags",
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
    # The LeRobot v3 dataset format; below the recorder, the bag converter and training.
    "lerobot_dataset": {"lerobot_ros": "module"},  # the command framework of its CLI (lerobot_ros.command)
    "lerobot_bags": {"lerobot_ros": "module", "lerobot_contract": "module", "lerobot_dataset": "module"},
    # The live recorder node and the viewer: nothing imports them.
    "lerobot_recorder": {
        "lerobot_ros": "module",
        "lerobot_contract": "module",
        "lerobot_dataset": "module",
        "lerobot_bags": "module",
    },
    "lerobot_training": {"lerobot_ros": "module", "lerobot_dataset": "lazy"},
    "lerobot_policy_server": {"lerobot_ros": "module", "lerobot_training": "lazy"},
    "lerobot_policy_node": {
        "lerobot_ros": "module",
        "lerobot_contract": "module",
        "lerobot_dataset": "lazy",  # the dataset reader of `lerobot-ros replay`
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
        "lerobot_dataset": "module",
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


def test_nothing_imports_the_recorder_node_package() -> None:
    """The live recorder and its viewer sit at the end of their branch: datasets come from lerobot_dataset."""
    assert [package for package, allowed in ALLOWED.items() if "lerobot_recorder" in allowed] == []


def _module_of(path: Path) -> str:
    for package, root in PACKAGES.items():
        if path.is_relative_to(root):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise AssertionError(path)


def _module_graph() -> dict[str, set[str]]:
    """Module -> the modules of our packages it imports: every import, lazy and typing-only ones included."""
    files = {_module_of(path): path for root in PACKAGES.values() for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from a.b import c`: the module a.b.c where there is one, else a.b
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                           for a in node.names]  # fmt: skip
            else:
                continue
            graph[module] |= {target for target in targets if target in files and target != module}
    return graph


def test_no_two_modules_import_each_other() -> None:
    """No import circle between modules (Tarjan's strongly connected components of the module graph)."""
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert not circles, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)
