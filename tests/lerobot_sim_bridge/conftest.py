"""Shared setup of the sim bridge tests: headless MuJoCo (subprocesses: fixture `sim_env` of lerobot_ros.testing)."""

import contextlib
import os
from collections.abc import Iterator
from typing import Any

# Before mujoco is imported anywhere in the test process: software EGL (Mesa), no display needed.
os.environ.setdefault("MUJOCO_GL", "egl")


@contextlib.contextmanager
def in_process_bridge(ros_domain: int, **parameters: Any) -> Iterator[Any]:
    """A lockstep SimBridge in this process, without cameras and without its worker thread started.

    Its node is created in its own rclpy context; the simulation is released and the context shut down on exit.
    Extra keyword arguments are node parameters (seed 3 unless given).
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from lerobot_sim_bridge.nodes.bridge import SimBridge

    values = {"mode": "lockstep", "cameras": "", "seed": 3, **parameters}
    context = Context()
    rclpy.init(context=context, domain_id=ros_domain)
    node = None
    try:
        node = SimBridge(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
        yield node
    finally:
        if node is not None:
            node.shutdown()  # the worker was never started: this releases the simulation
            node.destroy_node()
        context.try_shutdown()
