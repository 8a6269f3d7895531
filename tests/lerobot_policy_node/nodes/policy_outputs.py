"""A probe of what the policy node publishes, shared by the policy node's process tests."""

from __future__ import annotations

import threading
import time


class PolicyOutputProbe:
    """Keeps the policy node's ActionChunks and its latched PolicyStatus (lists guarded by `lock`)."""

    def __init__(self, node) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        from lerobot_msgs.msg import ActionChunk, PolicyStatus

        self.node = node
        self.lock = threading.Lock()
        self.chunks: list = []
        self.statuses: list = []
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        node.create_subscription(ActionChunk, "/policy/action_chunk", self._keep(self.chunks), 50)
        node.create_subscription(PolicyStatus, "/policy/status", self._keep(self.statuses), latched)

    def _keep(self, into: list):
        def on_message(msg) -> None:
            with self.lock:
                into.append(msg)

        return on_message

    def status(self, predicate, timeout: float = 60.0):
        """The latest PolicyStatus matching `predicate`, waiting up to `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for status in reversed(self.statuses):
                    if predicate(status):
                        return status
            time.sleep(0.05)
        with self.lock:
            last = self.statuses[-1] if self.statuses else None
        raise AssertionError(f"no matching PolicyStatus within {timeout} s; last: {last}")
