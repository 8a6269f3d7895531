"""A multi-threaded rclpy executor that waits instead of spinning while its callbacks wait for a worker.

rclpy's `MultiThreadedExecutor` (Kilted's wheels) yields every handler that is not yet executing again on each
`spin_once`, and submits it to its thread pool again. A handler submitted a moment ago is not executing until
a worker thread holds the GIL, so the spinning thread resubmits it thousands of times a second while holding
the GIL itself: the callbacks it waits for are starved, more handlers queue up, and the node falls seconds
behind on a quiet machine (measured in the recorder: ~10,000 spins/s, the spinning thread at 90 % of a core,
messages handled up to 1 s late). rclpy fixed this upstream (rclpy PRs #1469 and #1547) after Kilted.

`ThreadPoolExecutor` submits each handler once: while its last submission still waits for (or runs on) a
worker, the spinning thread sleeps a millisecond instead. Handlers whose coroutine is suspended (their
submission has returned) are resubmitted as rclpy does.

Both executors here (use them instead of rclpy's) also survive an entity destroyed by another thread while the
spinning thread builds its wait set: rclpy marks each waitable in use, then adds it to the wait set, and a
`destroy_subscription` (or publisher) landing between the two makes rclpy raise InvalidHandle out of `spin`
(rclpy issues #1142, #1206; still open for Kilted). The test probe's spinning thread died that way under load
(every later wait timed out); a thread-pool node whose worker destroys subscriptions on a lifecycle transition
(the recorder, the policy node) is open to the same race. Here the wait set is built again without the
destroyed entity.

`ActionClient` is rclpy's, safe to create while another thread spins its node: rclpy's adds itself to the node's
waitables before it creates the lock its `get_num_entities` takes, and an executor woken in between died with
"'ActionClient' object has no attribute '_lock'" (seen under load: the test probe's spin thread).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy import executors as rclpy_executors
from rclpy.action import ActionClient as RclpyActionClient
from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.executors import (
    ConditionReachedException,
    ExternalShutdownException,
    ShutdownException,
    TimeoutException,
)
from rclpy.task import Task

# How long the spinning thread steps aside when the handler it got is still queued for a worker.
_QUEUED_WAIT_S = 0.001
# Wait sets built again in a row when entities keep being destroyed under it; then rclpy's error is raised.
_REBUILDS = 100


class _RebuildsAfterDestroy(rclpy_executors.Executor):
    """`wait_for_ready_callbacks` that builds the wait set again when another thread destroyed one of its entities."""

    def wait_for_ready_callbacks(self, *args: Any, **kwargs: Any) -> tuple[Task[None], Any, Any]:
        for _ in range(_REBUILDS):
            try:
                return super().wait_for_ready_callbacks(*args, **kwargs)
            except InvalidHandle:
                # Destroyed between being marked in use and being added: rclpy's generator is spent, and the node
                # no longer lists the entity, so the next call builds a wait set without it.
                continue
        return super().wait_for_ready_callbacks(*args, **kwargs)


class SingleThreadedExecutor(_RebuildsAfterDestroy, rclpy_executors.SingleThreadedExecutor):
    """rclpy's `SingleThreadedExecutor` that survives an entity destroyed by another thread (module docstring)."""


class ThreadPoolExecutor(_RebuildsAfterDestroy, rclpy_executors.MultiThreadedExecutor):
    """`MultiThreadedExecutor` without the resubmission busy loop (see the module docstring); same API."""

    def __init__(self, num_threads: int | None = None, *, context: Context | None = None) -> None:
        super().__init__(num_threads, context=context)
        self._submissions: dict[Any, concurrent.futures.Future[Any]] = {}

    def _spin_once_impl(
        self,
        timeout_sec: float | Any | None = None,
        wait_condition: Callable[[], bool] = lambda: False,
    ) -> None:
        try:
            handler, _entity, _node = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
        except (ExternalShutdownException, ShutdownException, TimeoutException, ConditionReachedException):
            return
        submitted = self._submissions.get(handler)
        if submitted is not None and not submitted.done():
            # Still queued for (or running on) a worker: submitting it again only burns the GIL it needs.
            time.sleep(_QUEUED_WAIT_S)
            return
        self._submissions[handler] = self._executor.submit(handler)
        for task in [t for t in self._submissions if t.done()]:
            del self._submissions[task]
            task.result()  # raise a callback's exception here, as rclpy's executors do


class ActionClient(RclpyActionClient):  # type: ignore[misc]
    """rclpy's `ActionClient` with its lock made before it is handed to the node (module docstring); same API."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._first_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    @property
    def _lock(self) -> threading.Lock:
        return self._first_lock

    @_lock.setter
    def _lock(self, _lock: threading.Lock) -> None:
        """rclpy assigns its own lock after adding the client to the node; the first one stays (one lock, always)."""
