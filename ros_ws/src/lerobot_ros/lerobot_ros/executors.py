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
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

from rclpy.context import Context
from rclpy.executors import (
    ConditionReachedException,
    ExternalShutdownException,
    MultiThreadedExecutor,
    ShutdownException,
    TimeoutException,
)

# How long the spinning thread steps aside when the handler it got is still queued for a worker.
_QUEUED_WAIT_S = 0.001


class ThreadPoolExecutor(MultiThreadedExecutor):
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
