"""Graph name rules the introspection commands share with the `ros2` CLI (pure, no rclpy)."""

from __future__ import annotations

CLI_NODE_PREFIX = "_lerobot_ros_cli"


def cli_node_name(pid: int) -> str:
    """Name of the node a CLI process creates; the leading underscore hides it like `ros2` CLI nodes."""
    return f"{CLI_NODE_PREFIX}_{pid}"


def is_hidden_name(name: str) -> bool:
    """True when any token of a topic, service or node name starts with `_` (`/arm/_action/status`)."""
    return any(token.startswith("_") for token in name.split("/"))


def fully_qualified_node_name(namespace: str, name: str) -> str:
    """`/ns/name` from a node's namespace and name (namespace `/` gives `/name`)."""
    return f"{namespace.rstrip('/')}/{name}"


def split_node_name(fully_qualified: str) -> tuple[str, str]:
    """(namespace, name) of a node name; a name without a leading `/` is taken from the root namespace."""
    path = fully_qualified if fully_qualified.startswith("/") else f"/{fully_qualified}"
    namespace, _, name = path.rpartition("/")
    return namespace or "/", name
