"""The thread-pool executor submits each handler once while it waits for a worker (no resubmission busy loop)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from lerobot_ros.executors import ThreadPoolExecutor


@pytest.fixture
def context(ros_domain: int) -> Iterator[Any]:
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=ros_domain)
    yield ctx
    ctx.try_shutdown()


def test_busy_workers_do_not_make_it_resubmit_handlers(context: Any) -> None:
    import rclpy
    from rclpy.callback_groups import ReentrantCallbackGroup

    node = rclpy.create_node("executor_probe", context=context)
    executor = ThreadPoolExecutor(num_threads=2, context=context)
    executor.add_node(node)
    submissions: Counter[Any] = Counter()
    submit = executor._executor.submit

    def counting_submit(fn: Any, *args: Any) -> Any:
        submissions[fn] += 1
        return submit(fn, *args)

    executor._executor.submit = counting_submit  # type: ignore[method-assign]
    runs = Counter[str]()
    lock = threading.Lock()

    def slow() -> None:
        with lock:
            runs["slow"] += 1
        time.sleep(0.02)  # two of these keep both workers busy, so the quick timer's handlers wait in the queue

    def quick() -> None:
        with lock:
            runs["quick"] += 1

    group = ReentrantCallbackGroup()
    node.create_timer(0.005, slow, callback_group=group)
    node.create_timer(0.005, slow, callback_group=group)
    node.create_timer(0.005, quick, callback_group=group)
    deadline = time.monotonic() + 30.0
    try:
        while (runs["slow"] < 10 or runs["quick"] < 10) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown()
        node.destroy_node()
    assert runs["slow"] >= 10 and runs["quick"] >= 10, f"callbacks did not run: {dict(runs)}"
    assert max(submissions.values()) == 1, f"handlers submitted again while queued: {max(submissions.values())}"
