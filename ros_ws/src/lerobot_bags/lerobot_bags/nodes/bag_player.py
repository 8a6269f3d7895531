"""The ROS side of `lerobot-ros bag play`: one publisher per topic with the recorded QoS, raw CDR out on time."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from lerobot_bags.play import BagPlayback, PlayQos
from lerobot_contract.time import NS
from lerobot_ros.message_conversion import import_message_type

_SLEEP_STEP_S = 0.05  # longest sleep between checks of the stop flag


def qos_profile(qos: PlayQos) -> QoSProfile:
    """The rclpy profile of a PlayQos."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_ALL if qos.keep_all else HistoryPolicy.KEEP_LAST,
        depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if qos.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.transient_local else DurabilityPolicy.VOLATILE,
    )


class BagPlayer(Node):
    """Publishes a BagPlayback's passes in real time (scaled by the rate), and /clock when asked."""

    def __init__(self, playback: BagPlayback, **kw: Any) -> None:
        super().__init__("bag_player", **kw)
        self.playback = playback
        self._topic_publishers: dict[str, Any] = {}
        for name, topic in playback.topics.items():
            cls = import_message_type(topic.msgtype)
            self._topic_publishers[name] = self.create_publisher(cls, name, qos_profile(topic.qos))
        self._clock_pub = None  # not `_clock`: that is the node's own clock in rclpy
        if playback.options.clock_hz > 0:
            # Reliable depth 1 matches both rclcpp's and rclpy's /clock subscriptions (best effort, depth 1).
            self._clock_pub = self.create_publisher(Clock, "/clock", QoSProfile(depth=1))
        self.published: Counter[str] = Counter()
        self._pass_start: float | None = None
        self._done = threading.Event()
        self._clock_lock = threading.Lock()  # /clock runs forward: a pass start and the clock thread take turns

    def wait_for_subscribers(self, stop: Callable[[], bool]) -> bool:
        """Block until every played topic has a matched subscription (False when stopped first)."""
        while not stop():
            if all(p.get_subscription_count() > 0 for p in self._topic_publishers.values()):
                return True
            time.sleep(_SLEEP_STEP_S)
        return False

    def play(self, stop: Callable[[], bool]) -> None:
        """Publish every pass (one, or forever with --loop) until done or `stop()` turns true."""
        clock_thread = None
        if self._clock_pub is not None:
            clock_thread = threading.Thread(target=self._clock_loop, name="bag-clock", daemon=True)
            clock_thread.start()
        try:
            for messages in self.playback.passes():
                # The pass's timeline (and /clock) starts once its first message is read: opening the bag takes
                # tens of ms, which would otherwise make the first messages late against /clock.
                first = next(messages, None)
                with self._clock_lock:
                    self._pass_start = time.monotonic()
                    self._publish_clock(self._pass_start)  # /clock runs before the first message goes out
                for due in itertools.chain([first] if first is not None else [], messages):
                    if not self._sleep_until(self._pass_start + due.at_s, stop):
                        return
                    self._topic_publishers[due.topic].publish(due.raw)
                    self.published[due.topic] += 1
                if stop():
                    return
        finally:
            self._done.set()
            if clock_thread is not None:
                clock_thread.join()

    def finish(self, timeout_s: float = 5.0) -> list[str]:
        """Wait (bounded) until reliable subscribers acknowledged what was sent; topics still unacknowledged."""
        late = []
        for name, pub in self._topic_publishers.items():
            if self.playback.topics[name].qos.reliable and not pub.wait_for_all_acked(_duration(timeout_s)):
                late.append(name)
        return late

    def _sleep_until(self, deadline: float, stop: Callable[[], bool]) -> bool:
        while True:
            if stop():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, _SLEEP_STEP_S))

    def _publish_clock(self, pass_start: float) -> None:
        if self._clock_pub is not None:
            now_ns = self.playback.clock_ns(time.monotonic() - pass_start)
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = divmod(now_ns, NS)
            self._clock_pub.publish(msg)

    def _clock_loop(self) -> None:
        period = 1.0 / self.playback.options.clock_hz
        next_tick = time.monotonic()
        while not self._done.is_set():
            with self._clock_lock:
                if self._pass_start is not None:
                    self._publish_clock(self._pass_start)
            next_tick += period
            self._done.wait(max(0.0, next_tick - time.monotonic()))


def _duration(seconds: float) -> Any:
    from rclpy.duration import Duration

    return Duration(nanoseconds=round(seconds * NS))
