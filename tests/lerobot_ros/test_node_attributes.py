"""No node of this repository assigns an attribute that rclpy's Node or LifecycleNode keeps its own state in.

rclpy keeps a node's entities in plain instance attributes (`_subscriptions`, `_timers`, `_clock`, ...). A
subclass that assigns one of those names replaces rclpy's state: the recorder's `self._subscriptions = []`
dropped the /clock subscription that `use_sim_time` creates in `Node.__init__`, so its sim time never moved
and its timers never fired (issue 16); the bag player's `self._clock` replaced the node's clock.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rclpy.lifecycle.managed_entity
import rclpy.lifecycle.node
import rclpy.node

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "ros_ws" / "src", REPO / "sim_bridge", REPO / "training"]
RCLPY_NODE_CLASSES = {"Node", "LifecycleNode"}


def assigned_self_attributes(tree: ast.AST) -> dict[str, int]:
    """`self.X = ...` / `self.X: T = ...` / `self.X += ...` targets in `tree`, with their first line."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) and leaf.value.id == "self":
                    found.setdefault(leaf.attr, leaf.lineno)
    return found


def rclpy_node_attributes() -> set[str]:
    """The private attributes rclpy's Node, LifecycleNode and their mixins assign on the instance."""
    names: set[str] = set()
    for module in (rclpy.node, rclpy.lifecycle.node, rclpy.lifecycle.managed_entity):
        assert module.__file__ is not None
        names |= set(assigned_self_attributes(ast.parse(Path(module.__file__).read_text())))
    # `__x` is name-mangled per class: no subclass can collide with it.
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def node_classes() -> list[tuple[Path, ast.ClassDef]]:
    """Every class in the sources that derives, directly or through one another, from an rclpy node class."""
    classes = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            text = path.read_text()
            if "/tests/" in str(path) or "Node" not in text:
                continue
            classes += [(path, c) for c in ast.parse(text).body if isinstance(c, ast.ClassDef)]
    node_names = set(RCLPY_NODE_CLASSES)
    found: dict[int, tuple[Path, ast.ClassDef]] = {}
    changed = True
    while changed:
        changed = False
        for path, cls in classes:
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in cls.bases}
            if id(cls) not in found and bases & node_names:
                found[id(cls)] = (path, cls)
                node_names.add(cls.name)
                changed = True
    return list(found.values())


def test_rclpy_keeps_the_entities_in_the_attributes_this_test_guards() -> None:
    attrs = rclpy_node_attributes()
    assert {"_subscriptions", "_timers", "_clock", "_publishers", "_services", "_time_source"} <= attrs


def test_no_node_overwrites_rclpys_own_attributes() -> None:
    reserved = rclpy_node_attributes()
    classes = node_classes()
    assert len(classes) >= 15, [c.name for _, c in classes]  # the recorder, drivers, policy, sim bridge, ...
    clashes = [
        f"{path.relative_to(REPO)}:{line}: {cls.name} assigns self.{name}"
        for path, cls in classes
        for name, line in assigned_self_attributes(cls).items()
        if name in reserved
    ]
    assert clashes == [], "rename these (rclpy keeps its own state there):\n" + "\n".join(clashes)
