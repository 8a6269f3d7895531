"""Parameter declaration with descriptors, shared by the policy node and the executor node."""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node


def declare(
    node: Node,
    name: str,
    default: Any,
    text: str,
    *,
    read_only: bool = False,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] = (),
) -> None:
    """Declare `name` once, with its description, range and (for strings) allowed values in the descriptor."""
    extra: dict[str, Any] = {}
    if low is not None and high is not None:
        if isinstance(default, int) and not isinstance(default, bool):
            extra["integer_range"] = [IntegerRange(from_value=int(low), to_value=int(high))]
        else:
            extra["floating_point_range"] = [FloatingPointRange(from_value=float(low), to_value=float(high))]
    if choices:
        text = f"{text} (one of: {', '.join(choices)})"
        extra["additional_constraints"] = f"one of {list(choices)}"
    node.declare_parameter(name, default, ParameterDescriptor(description=text, read_only=read_only, **extra))


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> str | None:
    """A reason why `value` is not allowed for `name`, or None."""
    if value not in choices:
        return f"{name} must be one of {list(choices)}, got {value!r}"
    return None
