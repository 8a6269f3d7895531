"""A small parameterised publisher used by the demo launch file and the launcher tests.

Publishes std_msgs/String on `chatter` at `rate_hz`; the text is `message` followed by a counter.
"""

from __future__ import annotations

import sys

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.node import Node
from std_msgs.msg import String

from lerobot_ros.node_main import run_node


class DemoTalker(Node):
    def __init__(self) -> None:
        super().__init__("demo_talker")
        self.declare_parameter(
            "rate_hz",
            2.0,
            ParameterDescriptor(
                description="Publishing rate in Hz",
                read_only=True,
                floating_point_range=[FloatingPointRange(from_value=0.1, to_value=1000.0)],
            ),
        )
        self.declare_parameter("message", "hello", ParameterDescriptor(description="Text before the counter"))
        rate_hz = self.get_parameter("rate_hz").get_parameter_value().double_value
        self._publisher = self.create_publisher(String, "chatter", 10)
        self._count = 0
        self._timer = self.create_timer(1.0 / rate_hz, self._publish)
        self.get_logger().info(f"publishing on {self._publisher.topic_name} at {rate_hz} Hz")

    def _publish(self) -> None:
        text = self.get_parameter("message").get_parameter_value().string_value
        self._publisher.publish(String(data=f"{text} {self._count}"))
        self._count += 1


def main(argv: list[str] | None = None) -> int:
    return run_node(DemoTalker, "demo_talker", args=argv)


if __name__ == "__main__":
    sys.exit(main())
