"""The `main()` of every node: DDS environment, rclpy, spin until stopped, a clean shutdown, an exit code.

rclpy's own signal handlers shut the ROS context down the moment SIGINT or SIGTERM arrives, before the node's
threads have stopped or its last status is out: whatever publishes after that fails ("publisher's context is
invalid"), and the KeyboardInterrupt they raise in the main thread can land half-way through the executor
(a handler coroutine made but never run is then "never awaited"). `run_node` installs its own handlers:

* while the node is being made and started (`create`, `start`: opening a device, loading a model, waiting for
  topics) SIGINT and SIGTERM raise KeyboardInterrupt there, so a slow start can be interrupted;
* once it runs, they only ask the spin loop to stop; it wakes at least every `SPIN_TIMEOUT_S`;
* then `shutdown` runs while the context is still valid (stop threads, publish a last status, close files),
  the executor and the node are destroyed and rclpy is shut down, last;
* a second SIGINT or SIGTERM exits at once (status 128 + signal number), without cleaning up.

A stop by signal exits 0 without a traceback, a node that finished by itself with the code `finished` gives,
and a start-up error of one of the `startup_errors` types with one log line and status 1.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TypeVar

import rclpy
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from lerobot_ros.dds import apply_ros_environment
from lerobot_ros.executors import SingleThreadedExecutor
from lerobot_ros.node_kit.parameters import ParameterError

NodeT = TypeVar("NodeT", bound=Node)
LifecycleNodeT = TypeVar("LifecycleNodeT", bound=LifecycleNode)

# Longest wait of the spin loop before it looks at a stop request again.
SPIN_TIMEOUT_S = 0.1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Set by the first SIGINT or SIGTERM; a node's own loop (`run_node(loop=...)`) polls `is_set()`."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal: signal.Signals | None = None
        self.interrupts = True  # during start-up a signal also raises KeyboardInterrupt

    def is_set(self) -> bool:
        return self._event.is_set()

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        """The Python signal handler (runs in the main thread between bytecodes)."""
        sig = signal.Signals(signum)
        if self._event.is_set():
            os.write(2, f"second {sig.name}: exiting now, without cleaning up\n".encode())
            os._exit(128 + signum)
        self.signal = sig
        self._event.set()
        if self.interrupts:
            raise KeyboardInterrupt


def run_node(
    create: Callable[[], NodeT],
    name: str,
    *,
    args: Sequence[str] | None = None,
    executor: Callable[[], Executor] = SingleThreadedExecutor,
    start: Callable[[NodeT, Executor], None] | None = None,
    finished: Callable[[NodeT], int | None] | None = None,
    loop: Callable[[NodeT, Executor, StopRequest], int | None] | None = None,
    shutdown: Callable[[NodeT], None] | None = None,
    startup_errors: tuple[type[Exception], ...] = (),
    what: str = "",
) -> int:
    """Run the node `create()` makes until SIGINT/SIGTERM (or `finished`); returns the exit status.

    `executor()` makes the executor that spins it. `start(node, executor)` runs before spinning (autostart,
    threads, more nodes on the executor). The spin loop ends on a signal, or when `finished(node)` gives an exit
    status instead of None; `loop(node, executor, stop)` replaces it for nodes that also wait on something
    else (a terminal). `shutdown(node)` runs whatever ended the run, while ROS still works. An exception of a
    `startup_errors` type (and a ParameterError: a parameter value its table does not allow) from `create` or
    `start` is logged by logger `name` as ``cannot start <what>: <error>`` (`what` defaults to `name`) and
    the status is 1.
    """
    startup_errors = (ParameterError, *startup_errors)
    apply_ros_environment()
    stop = StopRequest()
    previous = {sig: signal.signal(sig, stop.handle) for sig in STOP_SIGNALS}
    node: NodeT | None = None
    ros_executor: Executor | None = None
    code = 0
    try:
        try:
            rclpy.init(args=None if args is None else list(args), signal_handler_options=SignalHandlerOptions.NO)
            node = create()
            ros_executor = executor()
            ros_executor.add_node(node)
            if start is not None:
                start(node, ros_executor)
            stop.interrupts = False
        except startup_errors as err:
            stop.interrupts = False
            rclpy.logging.get_logger(name).fatal(f"cannot start {what or name}: {err}")
            code = 1
        except KeyboardInterrupt:
            stop.interrupts = False  # stopped while starting: shut down below
        else:
            if loop is not None:
                code = loop(node, ros_executor, stop) or 0
            else:
                code = _spin(node, ros_executor, stop, finished)
        if stop.signal is not None and node is not None:
            node.get_logger().info(f"{stop.signal.name}: shutting down")
    finally:
        stop.interrupts = False
        try:
            if node is not None and shutdown is not None:
                shutdown(node)
        finally:
            if ros_executor is not None:
                ros_executor.shutdown()
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return code


def _spin(node: NodeT, executor: Executor, stop: StopRequest, finished: Callable[[NodeT], int | None] | None) -> int:
    while not stop.is_set() and node.context.ok():
        if finished is not None:
            code = finished(node)
            if code is not None:
                return code
        try:
            executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)
        except ExternalShutdownException:
            break  # rclpy was shut down by other code
    return 0


def autostart(node: LifecycleNode) -> bool:
    """Configure and activate `node` when its `autostart` parameter is true; False when a transition failed."""
    if not bool(node.get_parameter("autostart").value):
        return True
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        return False
    return bool(node.trigger_activate() == TransitionCallbackReturn.SUCCESS)


def run_lifecycle_node(
    create: Callable[[], LifecycleNodeT],
    name: str,
    release: Callable[[LifecycleNodeT], None],
    *,
    args: Sequence[str] | None = None,
    executor: Callable[[], Executor] = SingleThreadedExecutor,
) -> int:
    """`run_node` for a lifecycle node: `autostart` it, spin, then `release(node)` (threads, hardware).

    A failed transition at start-up leaves the node running in its state, as a lifecycle manager expects.
    """

    def start(node: LifecycleNodeT, _executor: Executor) -> None:
        autostart(node)

    return run_node(create, name, args=args, executor=executor, start=start, shutdown=release)
