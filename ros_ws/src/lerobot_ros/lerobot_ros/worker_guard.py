"""No thread of a node dies silently: one guard around every worker loop and timer callback.

A node's worker threads (control loops, tick threads, inference, encoders) and timer callbacks run outside
the executor's error handling: an unexpected exception there ends the thread and prints at most a
traceback on stderr, while the node stays up, keeps its lifecycle state and its other timers keep saying
OK. `WorkerGuard` turns such an exception into a reported failure:

* it is logged once with its traceback (later failures of the same worker are counted, logged throttled);
* it is reported as ERROR on /diagnostics (`<node>: <worker>`, republished every second) and through
  `annotate` on the node's own status;
* a lifecycle node leaves `active` through the error path (deactivate -> ERROR -> `on_error` ->
  unconfigured), on the executor's thread like every other transition: a commanding node stops commanding
  and the robot holds its last target.

Usage, in a node::

    self._guard = WorkerGuard.for_node(self)
    self._thread = self._guard.thread("tick loop", self._loop)     # a worker thread
    self.create_timer(1.0, self._guard.wrap("status", self._publish_status))  # a timer callback

`WorkerGuard(...)` with plain callables is the graph-free core (unit tests, non-ROS workers).
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.lifecycle import LifecycleNode, LifecycleState, ManagedEntity, TransitionCallbackReturn

from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, Level, diagnostic_status

P = ParamSpec("P")
T = TypeVar("T")

REPUBLISH_PERIOD_S = 1.0
RETRY_PERIOD_S = 0.01
PRIMARY_STATES = ("unconfigured", "inactive", "active", "finalized")


@dataclass(frozen=True)
class WorkerFailure:
    """An unexpected exception that ended a worker (or one call of a timer callback)."""

    worker: str
    error: str
    traceback: str
    count: int = 1

    @property
    def message(self) -> str:
        """One line: which worker failed and why."""
        times = f" ({self.count} times)" if self.count > 1 else ""
        return f"{self.worker} failed{times}: {self.error}"


class WorkerGuard:
    """Runs workers so that an unexpected exception is logged, reported and handed to `on_failure`.

    `log_error(text)` logs, `report(failure)` publishes the failure (called again for repeats),
    `on_failure(failure)` runs once per worker's first failure (the lifecycle error transition of a node);
    `shutting_down()` true means the process is stopping: the exception is logged, nothing else.
    """

    def __init__(
        self,
        *,
        log_error: Callable[[str], None],
        report: Callable[[WorkerFailure], None] | None = None,
        on_failure: Callable[[WorkerFailure], None] | None = None,
        shutting_down: Callable[[], bool] | None = None,
    ) -> None:
        self._log_error = log_error
        self._report = report
        self._on_failure = on_failure
        self._shutting_down = shutting_down
        self._lock = threading.Lock()
        self._failures: dict[str, WorkerFailure] = {}
        self._serials: dict[str, int] = {}  # worker -> serial number of its latest failure
        self._serial = 0

    @classmethod
    def for_node(cls, node: Any, *, hardware_id: str = "") -> NodeWorkerGuard:
        """The guard of a ROS node (a `rclpy.node.Node` or `rclpy.lifecycle.LifecycleNode`)."""
        return NodeWorkerGuard(node, hardware_id=hardware_id)

    @property
    def failures(self) -> list[WorkerFailure]:
        """Failures since the last `clear`, oldest first."""
        with self._lock:
            return list(self._failures.values())

    @property
    def failed(self) -> bool:
        with self._lock:
            return bool(self._failures)

    @property
    def serial(self) -> int:
        """Number of failures recorded so far (serial number of the latest)."""
        with self._lock:
            return self._serial

    def clear(self, upto: int | None = None) -> None:
        """Forget the failures (after the node was configured again); with `upto`, only those with a serial
        number <= `upto` (a failure recorded while the node was being activated stays)."""
        with self._lock:
            for worker in [w for w, n in self._serials.items() if upto is None or n <= upto]:
                del self._failures[worker], self._serials[worker]

    def call(self, worker: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """`fn(*args, **kwargs)`; None when it raised an exception (reported, not re-raised)."""
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # the one place that catches everything: it reports it
            self.failure(worker, err)
            return None

    def wrap(self, worker: str, fn: Callable[P, T]) -> Callable[P, T | None]:
        """`fn` guarded (a timer callback, a thread target)."""

        def guarded(*args: P.args, **kwargs: P.kwargs) -> T | None:
            return self.call(worker, fn, *args, **kwargs)

        guarded.__name__ = getattr(fn, "__name__", worker)
        guarded.__doc__ = fn.__doc__
        return guarded

    def thread(self, worker: str, fn: Callable[..., Any], *args: Any, daemon: bool = True) -> threading.Thread:
        """A started thread running `fn(*args)` under the guard, named after `worker`."""
        thread = threading.Thread(target=self.call, args=(worker, fn, *args), name=worker, daemon=daemon)
        thread.start()
        return thread

    def failure(self, worker: str, err: BaseException) -> WorkerFailure:
        """Record `err` as the failure of `worker`: log, report, and on the first one `on_failure`."""
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__)).rstrip()
        error = f"{type(err).__name__}: {err}"
        with self._lock:
            previous = self._failures.get(worker)
            failure = WorkerFailure(worker, error, text, previous.count + 1 if previous else 1)
            self._failures[worker] = failure
            self._serial += 1
            self._serials[worker] = self._serial
        if self._shutting_down is not None and self._shutting_down():
            self._log_error(f"{worker} ended while shutting down: {error}")
            return failure
        if previous is None:
            self._log_error(f"{failure.message}\n{text}")
        if self._report is not None:
            self._report(failure)
        if previous is None and self._on_failure is not None:
            self._on_failure(failure)
        return failure

    def annotate(self, status: Any) -> Any:
        """Turn a node's own `diagnostic_msgs/DiagnosticStatus` into ERROR while a worker has failed."""
        failures = self.failures
        if failures:
            status.level = DiagnosticStatus.ERROR
            status.message = "; ".join(f.message for f in failures)
        return status


class NodeWorkerGuard(WorkerGuard):
    """`WorkerGuard` of a ROS node: logger, /diagnostics, and the lifecycle error transition."""

    def __init__(self, node: Any, *, hardware_id: str = "") -> None:
        self._node = node
        self._hardware_id = hardware_id
        self._diagnostics = DiagnosticsPublisher(node)
        self._pending = threading.Event()
        self._handled = 0  # failures up to this serial number went through their error transition
        self._retry: Any = None
        self._error_requested = threading.Event()
        self._republish: Any = None
        # Transitions run on the executor's thread, like every other one: the worker only wakes it.
        self._signal = node.create_guard_condition(self._on_signal)
        self._lifecycle = isinstance(node, LifecycleNode)
        if self._lifecycle:
            node.add_managed_entity(_ErrorPath(self))
        super().__init__(
            log_error=lambda text: node.get_logger().error(text),
            report=self._publish,
            on_failure=lambda _failure: self._wake(),
            shutting_down=lambda: not node.context.ok(),
        )

    @property
    def error_requested(self) -> bool:
        """True between a failure and the end of the error transition it asked for."""
        return self._error_requested.is_set()

    def _wake(self) -> None:
        self._error_requested.set()
        self._pending.set()
        self._signal.trigger()

    def _on_signal(self) -> None:
        """Executor thread: keep reporting, and leave `active` through the error path."""
        if not self._pending.is_set():
            return
        self._pending.clear()
        handling = self.serial
        if self._republish is None:
            self._republish = self._node.create_timer(REPUBLISH_PERIOD_S, self._publish_all)
        if not self._lifecycle:
            return
        node = self._node
        if _state(node) not in PRIMARY_STATES:  # a transition runs on another thread: look again once it is done
            self._pending.set()
            if self._retry is None:
                self._retry = node.create_timer(RETRY_PERIOD_S, self._on_retry)
            return
        if _state(node) == "active":
            node.trigger_deactivate()  # _ErrorPath returns ERROR: on_error, then unconfigured
        self._error_requested.clear()
        if _state(node) == "inactive":  # a node whose on_deactivate does not ask its managed entities
            node.get_logger().error("a worker failed: cleaning up to unconfigured")
            node.trigger_cleanup()
        self._handled = max(self._handled, handling)

    def _on_retry(self) -> None:
        if self._retry is not None:
            self._node.destroy_timer(self._retry)
            self._retry = None
        self._on_signal()

    def _publish_all(self) -> None:
        for failure in self.failures:
            self._publish(failure)

    def _publish(self, failure: WorkerFailure) -> None:
        last_line = failure.traceback.splitlines()[-3:] if failure.traceback else []
        values = {
            "worker": failure.worker,
            "failures": failure.count,
            "where": " | ".join(line.strip() for line in last_line),
        }
        name = f"{self._node.get_fully_qualified_name()}: {failure.worker}"
        # quiet while the context goes away (shutdown): the failure is logged already
        self._diagnostics.publish(
            diagnostic_status(name, Level.ERROR, failure.message, values, hardware_id=self._hardware_id)
        )

    def clear(self, upto: int | None = None) -> None:
        super().clear(upto)
        if self._republish is not None and not self.failed:
            self._node.destroy_timer(self._republish)
            self._republish = None


def _state(node: Any) -> str:
    """The lifecycle state's label ('active', 'inactive', ...)."""
    return str(node._state_machine.current_state[1])


class _ErrorPath(ManagedEntity):
    """Managed entity of the guard: a deactivate asked for by a failure returns ERROR (-> `on_error`)."""

    def __init__(self, guard: NodeWorkerGuard) -> None:
        self._guard = guard

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        return TransitionCallbackReturn.ERROR if self._guard.error_requested else TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._guard.clear(upto=self._guard._handled)  # active again: failures already handled are history
        return TransitionCallbackReturn.SUCCESS
