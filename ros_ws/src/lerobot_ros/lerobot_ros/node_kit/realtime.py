"""The `realtime` parameters of a node with a control loop, declared once, and what they applied.

    self._realtime = declare_realtime(self)
    ...
    def _loop(self):
        self._realtime.apply("tick loop")            # first thing, in the loop's own thread
    ...
    values.update(self._realtime.diagnostic_values())  # in the node's /diagnostics status

See `lerobot_ros.realtime` for what is applied and how refusals fall back.
"""

from __future__ import annotations

from rclpy.node import Node

from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.realtime import RealtimeParameters, RealtimeThreads


def declare_realtime(node: Node) -> RealtimeThreads:
    """Declare `RealtimeParameters` on `node`; the returned object applies them to its threads and logs."""
    params = declare_parameters(node, RealtimeParameters)
    logger = node.get_logger()
    return RealtimeThreads(lambda: params.config, logger.warning, logger.info)
