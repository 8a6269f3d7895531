"""A lifecycle node whose worker thread raises when told to (std_msgs/Empty on ~/fail): the WorkerGuard's subject.

Run as a process by test_worker_guard.py: `python guard_probe_node.py --ros-args -r __ns:=/probe`.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_msgs.msg import Empty, String

from lerobot_ros.node_main import run_lifecycle_node
from lerobot_ros.worker_guard import WorkerGuard


class GuardProbe(LifecycleNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("guard_probe", **kwargs)
        self.declare_parameter("autostart", True)
        self._guard = WorkerGuard.for_node(self, hardware_id="probe")
        self._fail = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sub: Any = None
        self._events = self.create_publisher(String, "~/events", 10)

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._sub = self.create_subscription(Empty, "~/fail", lambda _msg: self._fail.set(), 10)
        self._guard.clear()
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop.clear()
        self._thread = self._guard.thread("work loop", self._loop)
        self.get_logger().info("active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop()
        return super().on_deactivate(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop()
        self._events.publish(String(data="on_error"))
        return TransitionCallbackReturn.SUCCESS

    def _loop(self) -> None:
        while not self._stop.wait(0.01):
            if self._fail.is_set():
                raise RuntimeError("injected fault in the work loop")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self._thread = None


def main() -> int:
    return run_lifecycle_node(GuardProbe, "guard_probe", GuardProbe.stop, args=sys.argv)


if __name__ == "__main__":
    sys.exit(main())
