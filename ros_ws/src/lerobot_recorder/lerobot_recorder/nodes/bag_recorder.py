"""The ROS side of `lerobot-ros bag record`: raw subscriptions feeding a `SplittingBagWriter` thread."""

from __future__ import annotations

import functools
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

from lerobot_recorder.recorder import RecorderError
from lerobot_recorder.recorder.bag_writer import SplittingBagWriter, TopicSelection, topics_to_record
from lerobot_recorder.recorder.messages import SequenceGaps, build_typestore
from lerobot_ros.message_conversion import MessageTypeError, import_message_type
from lerobot_ros.worker_guard import WorkerGuard


def _qos_time(duration: Any) -> QosTime:
    sec, nsec = divmod(int(duration.nanoseconds), 1_000_000_000)
    return QosTime(sec, nsec)


def rosbags_qos(profile: QoSProfile) -> Qos:
    """An rclpy QoS profile as rosbags writes it into metadata.yaml (offered_qos_profiles); same enum values."""
    return Qos(
        history=QosHistory(int(profile.history)),
        depth=int(profile.depth),
        reliability=QosReliability(int(profile.reliability)),
        durability=QosDurability(int(profile.durability)),
        deadline=_qos_time(profile.deadline),
        lifespan=_qos_time(profile.lifespan),
        liveliness=QosLiveliness(int(profile.liveliness)),
        liveliness_lease_duration=_qos_time(profile.liveliness_lease_duration),
        avoid_ros_namespace_conventions=bool(profile.avoid_ros_namespace_conventions),
    )


class BagRecorder(Node):
    """Records the selected topics (found again every second, for --regex / --all) into an mcap bag."""

    def __init__(
        self, selection: TopicSelection, output: Path, *, max_bytes: int = 0, max_duration_ns: int = 0, **kw: Any
    ) -> None:
        super().__init__("bag_recorder", **kw)
        self.selection = selection
        self._prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
        self._writer = SplittingBagWriter(
            output, build_typestore([], self._prefixes), max_bytes=max_bytes, max_duration_ns=max_duration_ns
        )
        self._queue: queue.Queue[tuple[str, int, bytes] | None] = queue.Queue(maxsize=20000)
        self._subscribed: dict[str, Any] = {}
        self._skipped: set[str] = set()
        self._heard: set[str] = set()
        self.error: str | None = None
        self.received = 0
        self.first_received_ns: int | None = None  # the system time the first message was received
        # Messages that reach this process after this time (system clock, ns) are not recorded (`stop_at`).
        self._stop_ns: int | None = None
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        # Messages published that never reached us (gaps in each publisher's sequence numbers), per topic.
        self.lost: dict[str, int] = {}
        self._gaps = SequenceGaps()
        self._last_lost_warning = 0.0
        self._guard = WorkerGuard.for_node(self, hardware_id="recorder")  # the writer never dies silently
        self._thread = threading.Thread(
            target=self._guard.wrap("bag writer", self._write_loop), name="bag-writer", daemon=True
        )
        self._thread.start()
        self.discover()
        self.create_timer(1.0, self.discover)

    @property
    def topics(self) -> list[str]:
        """Topics being recorded."""
        return sorted(self._subscribed)

    def discover(self) -> None:
        """Subscribe to selected topics that appeared since the last look."""
        wanted = topics_to_record(self.selection, self.get_topic_names_and_types())
        for topic, msgtype in wanted.items():
            if topic in self._subscribed or topic in self._skipped:
                continue
            try:
                store = build_typestore([msgtype], self._prefixes)
                self._writer.typestore.register({msgtype: store.fielddefs[msgtype]})
                self._register_deps(store, msgtype)
                self._writer.add_topic(topic, msgtype, self._offered_qos(topic))
                cls = import_message_type(msgtype)
            except (RecorderError, MessageTypeError) as err:
                self._skipped.add(topic)
                self.get_logger().warning(f"not recording {topic}: {err}")
                continue
            self._subscribed[topic] = self.create_subscription(
                cls, topic, functools.partial(self._on_message, topic), self._qos_for(topic), raw=True
            )
            self.get_logger().info(f"recording {topic} ({msgtype})")

    def _register_deps(self, store: Any, msgtype: str) -> None:
        pending, seen = [msgtype], set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            if name not in self._writer.typestore.fielddefs:
                self._writer.typestore.register({name: store.fielddefs[name]})
            for _, node in store.fielddefs[name][1]:
                kind, detail = node[0].name, node[1]
                if kind == "NAME":
                    pending.append(detail)
                elif kind in ("ARRAY", "SEQUENCE") and detail[0][0].name == "NAME":
                    pending.append(detail[0][1])

    def _offered_qos(self, topic: str) -> list[Qos]:
        """The QoS its publishers offer, for the bag's metadata (what `ros2 bag play` and `bag play` replay)."""
        return [rosbags_qos(info.qos_profile) for info in self.get_publishers_info_by_topic(topic)]

    def _qos_for(self, topic: str) -> QoSProfile:
        infos = self.get_publishers_info_by_topic(topic)
        reliable = bool(infos) and all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
        latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
        return QoSProfile(
            depth=100,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )

    def stop_at(self, system_ns: int) -> None:
        """Record only what reached this process by `system_ns` (system clock): what the middleware still holds
        from before is taken when spun, what arrives later is left out (a live topic never pauses)."""
        self._stop_ns = system_ns

    def _on_message(self, topic: str, raw: bytes, info: Any) -> None:
        # The middleware's reception time (system clock), not when this callback got to it, which lags under load.
        received_ns = int(info.get("received_timestamp") or 0) or time.time_ns()
        if self._stop_ns is not None and received_ns > self._stop_ns:
            return
        if self.first_received_ns is None:
            self.first_received_ns = received_ns
        self.received += 1
        lost = self._gaps.lost_from_info(topic, info)
        if lost:
            self.lost[topic] = self.lost.get(topic, 0) + lost
            if time.monotonic() - self._last_lost_warning >= 2.0:
                self._last_lost_warning = time.monotonic()
                self.get_logger().warning(
                    f"{topic}: {lost} message(s) lost before the recorder took them ({self.lost[topic]} in all)"
                )
        if topic not in self._heard:
            # Discovery can lag the subscription by seconds: say when data really starts to arrive.
            self._heard.add(topic)
            self.get_logger().info(f"first message on {topic}")
        stamp = int(self.get_clock().now().nanoseconds) if self._sim_time else received_ns
        self._queue.put((topic, stamp, raw))

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.error is not None:
                continue
            try:
                self._writer.write(*item)
            except (RecorderError, OSError) as err:
                self.error = f"writing the bag failed: {err}"

    def finish(self) -> dict[str, Any]:
        """Stop recording and close the bag(s); returns a summary."""
        for sub in self._subscribed.values():
            self.destroy_subscription(sub)
        self._queue.put(None)
        self._thread.join()
        start = time.monotonic()
        stats = self._writer.close()
        return {
            "bags": [str(b) for b in stats.bags],
            "messages": dict(stats.messages),
            "bytes": stats.bytes,
            "lost": dict(self.lost),  # published, never received (the bag lacks them)
            "close_s": round(time.monotonic() - start, 3),
            "error": self.error,
        }
