"""One `/diagnostics` report of a node: the DiagnosticStatus every node builds, and its stamped publication.

self._diagnostics = DiagnosticsPublisher(self)
self._diagnostics.publish(diagnostic_status(f"{self.get_name()}: camera", Level.WARN, "stalled", values))
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from rclpy.publisher import Publisher

DIAGNOSTICS_TOPIC = "/diagnostics"


class Level(enum.IntEnum):
    """diagnostic_msgs/DiagnosticStatus levels."""

    OK = 0
    WARN = 1
    ERROR = 2
    STALE = 3


def diagnostic_status(
    name: str,
    level: int | bytes,
    message: str,
    values: Mapping[str, object] = {},
    *,
    hardware_id: str = "",
) -> DiagnosticStatus:
    """A status with `values` as key/value strings (str() of each value, in order).

    `level` is a `Level` or DiagnosticStatus's own constants (bytes).
    """
    return DiagnosticStatus(
        level=level if isinstance(level, bytes) else bytes([int(level)]),
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=str(k), value=str(v)) for k, v in values.items()],
    )


class DiagnosticsPublisher:
    """Publishes a node's statuses on /diagnostics as one DiagnosticArray stamped with the node's clock."""

    def __init__(self, node: Node, topic: str = DIAGNOSTICS_TOPIC, depth: int = 10) -> None:
        self._node = node
        self._publisher: Publisher[DiagnosticArray] = node.create_publisher(DiagnosticArray, topic, depth)

    def publish(self, *statuses: DiagnosticStatus, stamp: Time | None = None) -> bool:
        """Publish, stamped `stamp` (default: now); False (nothing sent) when ROS is shutting down under the node."""
        array = DiagnosticArray(status=list(statuses))
        array.header.stamp = stamp if stamp is not None else self._node.get_clock().now().to_msg()
        try:
            self._publisher.publish(array)
        except Exception:
            if self._node.context.ok():
                raise
            return False
        return True
