"""A small parameterised publisher used by the demo launch file and the launcher tests.

Publishes std_msgs/String on `chatter` at `rate_hz`; the text is `message` followed by a counter.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from rclpy.node import Node
from std_msgs.msg import String

from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_node


@dataclass(frozen=True)
class DemoTalkerParameters:
    """The demo talker's parameters (`python -m lerobot_ros.node_kit markdown <this>`)."""

    rate_hz: float = param(2.0, "Publishing rate in Hz", low=0.1, high=1000.0)
    message: str = param("hello", "Text before the counter", read_only=False)


class DemoTalker(Node):
    def __init__(self) -> None:
        super().__init__("demo_talker")
        self.params = declare_parameters(self, DemoTalkerParameters)
        rate_hz = self.params.config.rate_hz
        self._publisher = self.create_publisher(String, "chatter", 10)
        self._count = 0
        self._timer = self.create_timer(1.0 / rate_hz, self._publish)
        self.get_logger().info(f"publishing on {self._publisher.topic_name} at {rate_hz} Hz")

    def _publish(self) -> None:
        self._publisher.publish(String(data=f"{self.params.config.message} {self._count}"))
        self._count += 1


def main(argv: list[str] | None = None) -> int:
    return run_node(DemoTalker, "demo_talker", args=argv)


if __name__ == "__main__":
    sys.exit(main())
