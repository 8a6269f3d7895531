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


def _destroy_in_the_window(node: Any, subscription: Any) -> None:
    """Make the next wait set that includes `subscription`'s event handler request its destruction between the
    executor marking the handler in use and adding it to the wait set: what another thread's
    `destroy_subscription` does when it lands in that window (rclpy issues #1142, #1206). Seen under load: the
    test probe's spin thread died with InvalidHandle and every later wait in that test timed out."""
    for handler in subscription.event_handlers:

        def add_after_destroy(wait_set: Any, add: Any = handler.add_to_wait_set) -> None:
            node.destroy_subscription(subscription)  # the first handler's call destroys; later ones find it gone
            add(wait_set)

        handler.add_to_wait_set = add_after_destroy


@pytest.mark.parametrize("kind", ["single", "pool"])
def test_a_subscription_destroyed_while_the_wait_set_is_built_does_not_stop_the_spin(context: Any, kind: str) -> None:
    import rclpy
    from std_msgs.msg import String

    from lerobot_ros.executors import SingleThreadedExecutor

    node = rclpy.create_node("destroy_probe", context=context)
    executor = SingleThreadedExecutor(context=context) if kind == "single" else ThreadPoolExecutor(2, context=context)
    executor.add_node(node)
    received: list[str] = []
    publisher = node.create_publisher(String, "destroy_probe", 10)
    node.create_subscription(String, "destroy_probe", lambda msg: received.append(msg.data), 10)
    doomed = node.create_subscription(String, "doomed", lambda msg: None, 10)
    _destroy_in_the_window(node, doomed)
    deadline = time.monotonic() + 30.0
    try:
        while not received and time.monotonic() < deadline:
            publisher.publish(String(data="still spinning"))
            executor.spin_once(timeout_sec=0.1)  # raised InvalidHandle here, from rclpy's wait set
    finally:
        executor.shutdown()
        node.destroy_node()
    assert received[:1] == ["still spinning"]
    assert doomed not in node.subscriptions


@pytest.mark.parametrize("kind", ["rclpy", "ours"])
def test_an_action_client_made_while_the_node_spins_is_usable_by_the_executor_at_once(context: Any, kind: str) -> None:
    """Seen under load (test_roundtrip's probe): "'ActionClient' object has no attribute '_lock'" out of the spin
    thread. rclpy's ActionClient adds itself to the node's waitables before it makes the lock that
    `get_num_entities` takes; an executor woken by that add (another thread spinning the node) asks it at once.
    Here the node asks the waitable at the moment it is added, as that executor does. The rclpy case shows the
    injection hits the bug (if a newer rclpy passes it, lerobot_ros.executors.ActionClient can go)."""
    import rclpy
    import rclpy.action

    from lerobot_msgs.action import RecordEpisode
    from lerobot_ros.executors import ActionClient

    node = rclpy.create_node("action_client_probe", context=context)
    add_waitable = node.add_waitable
    asked: list[Any] = []

    def add_and_ask(waitable: Any) -> None:
        add_waitable(waitable)
        asked.append(waitable.get_num_entities())  # what a spinning executor's wait-set build does next

    node.add_waitable = add_and_ask  # type: ignore[method-assign]
    client_class = rclpy.action.ActionClient if kind == "rclpy" else ActionClient
    try:
        if kind == "rclpy":
            with pytest.raises(AttributeError, match="_lock"):
                client_class(node, RecordEpisode, "/probe_action")
        else:
            client = client_class(node, RecordEpisode, "/probe_action")
            assert asked and asked[0].num_clients == 3  # goal, cancel and result services
            assert client._lock is client._lock and not client.server_is_ready()
            client.destroy()
    finally:
        node.destroy_node()
