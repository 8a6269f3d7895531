"""The `main()` of a lifecycle node: autostart, spin until Ctrl-C, release, shut down."""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn


def run_lifecycle_node(node: LifecycleNode, release: Callable[[], None], executor: Executor | None = None) -> None:
    """Configure and activate `node` when its `autostart` parameter is true, then spin it.

    Ctrl-C and an external shutdown are normal stops. Whatever ends the spin, `release` runs first (threads,
    hardware), then the node is destroyed and rclpy shut down.
    """
    executor = executor or SingleThreadedExecutor()
    executor.add_node(node)
    try:
        if bool(node.get_parameter("autostart").value) and node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
            node.trigger_activate()
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass  # normal stop: release below
    finally:
        release()
        node.destroy_node()
        rclpy.try_shutdown()
