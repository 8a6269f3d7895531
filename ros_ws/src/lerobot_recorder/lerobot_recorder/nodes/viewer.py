"""The live view's subscriber node (`lerobot-ros view`): reads the robot's topics, logs them through `ViewLogger`.

It only subscribes: every contract topic, the policy's ActionChunk topic, the recorder's status and episode
markers, and /diagnostics. Sensor streams are subscribed BEST_EFFORT (a slow viewer never holds back a
publisher) and images raw (CDR bytes): a callback only keeps the newest bytes, and a timer at `image_rate_hz`
deserializes and logs the newest picture per camera, so the decimated frames are the only ones converted.
Vector samples are buffered by their callbacks and sent to Rerun in batches by a 10 Hz timer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message

from lerobot_contract import Contract, FeatureContract, MessageMismatchError
from lerobot_msgs.msg import ActionChunk, RecorderStatus
from lerobot_recorder.view.entities import ROS_TIME, Chunk, ChunkOverlay, TopicCounter, ViewLogger, layout
from lerobot_ros.message_conversion import import_message_type
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters

# Vector streams keep a second of samples at 100 Hz (a busy machine delivers them in bursts); images only the
# newest (the image thread logs the newest picture per camera anyway).
VECTOR_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
IMAGE_QOS = QoSProfile(depth=2, reliability=ReliabilityPolicy.BEST_EFFORT)
CHUNK_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
EVENT_QOS = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE)
FLUSH_PERIOD_S = 0.1
TABLE_PERIOD_S = 1.0
# A contract topic silent this long after start is reported (once) as missing.
MISSING_AFTER_S = 3.0


def _stamp_s(stamp: Any) -> float:
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


@dataclass(frozen=True)
class ViewerParameters:
    """The live view node's parameters, all read-only (README: `python -m lerobot_ros.node_kit markdown <this>`)."""

    image_rate_hz: float = param(
        10.0, "pictures logged per second and camera (the newest one each time)", low=0.1, high=120.0
    )
    chunk_topic: str = param("/policy/action_chunk", "the policy's ActionChunk topic ('' = none)")
    recorder: str = param("/recorder", "the recorder node whose status and episode markers are shown")


class Viewer(Node):
    """See the module docstring. `view` is where entities go; `contract` says which topics to read."""

    def __init__(self, contract: Contract, view: ViewLogger, **kwargs: Any) -> None:
        super().__init__("lerobot_view", **kwargs)
        config = declare_parameters(self, ViewerParameters).config
        rate, chunk_topic, recorder = config.image_rate_hz, config.chunk_topic, config.recorder
        self.contract = contract
        self.view = view
        self._lock = threading.Lock()
        self._vectors: dict[str, list[tuple[float, np.ndarray]]] = {}
        self._images: dict[str, tuple[bytes, float] | None] = {}
        self._bad: dict[str, str] = {}
        self.images_seen: dict[str, int] = {}
        self._overlay = ChunkOverlay()
        self._action = next((f for f in contract.features.values() if f.key == "action"), None)
        self._started = time.monotonic()
        self._announced_missing: set[str] = set()

        topics = {f.topic: f.key for f in contract.features.values()}
        self._chunk_topic = str(chunk_topic)
        if self._chunk_topic:
            topics[self._chunk_topic] = "policy chunks"
        recorder = str(recorder).rstrip("/")
        self._status_topic = f"{recorder}/status" if recorder else ""
        if self._status_topic:
            topics[self._status_topic] = "recorder status"
        self.counter = TopicCounter(topics, started_s=0.0)
        vectors: dict[str, list[str]] = {}
        for feature in contract.features.values():
            msg_type = import_message_type(feature.type)
            if feature.is_image:
                self._images[feature.key] = None
                self.images_seen[feature.key] = 0
                self.create_subscription(msg_type, feature.topic, self._image_callback(feature), IMAGE_QOS, raw=True)
            else:
                self._vectors[feature.key] = []
                vectors[feature.key] = list(feature.names or feature.joints or ())
                self.create_subscription(msg_type, feature.topic, self._vector_callback(feature), VECTOR_QOS)
        chunk_names = list(self._action.names or self._action.joints or ()) if self._action is not None else []
        view.log_styles(vectors, chunk_names)
        cameras = [f.key for f in contract.features.values() if f.is_image]
        view.rec.send_blueprint(layout(cameras, vectors, live=True))
        view.log_document(
            "contract", f"# Contract `{contract.source}`\n\nrobot_type `{contract.robot_type}`, {contract.fps} fps"
        )
        if self._chunk_topic:
            self.create_subscription(ActionChunk, self._chunk_topic, self._on_chunk, CHUNK_QOS)
        if self._status_topic:
            self.create_subscription(RecorderStatus, self._status_topic, self._on_recorder_status, LATCHED_QOS)
            self.create_subscription(RecorderStatus, f"{recorder}/episode_start", self._on_episode_start, EVENT_QOS)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, EVENT_QOS)
        self.create_timer(FLUSH_PERIOD_S, self._flush_vectors)
        self._image_period_s = 1.0 / float(rate)
        self._stop = threading.Event()
        self._image_thread = threading.Thread(target=self._image_loop, name="view-images", daemon=True)
        self._image_thread.start()
        self.create_timer(TABLE_PERIOD_S, self._log_topics)

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def _now_s(self) -> float:
        return float(self.get_clock().now().nanoseconds) * 1e-9

    def _time_of(self, msg: Any) -> float:
        """The message's place on the timeline: its header stamp (contract `stamp: header`) or its arrival."""
        if self.contract.stamp == "header" and hasattr(msg, "header"):
            stamp = _stamp_s(msg.header.stamp)
            if stamp > 0:
                return stamp
        return self._now_s()

    def _vector_callback(self, feature: FeatureContract) -> Any:
        def callback(msg: Any) -> None:
            self.counter.seen(feature.topic, self._elapsed())
            try:
                values = feature.vector(msg)
            except MessageMismatchError as err:
                self._report_bad(feature.topic, str(err))
                return
            with self._lock:
                self._vectors[feature.key].append((self._time_of(msg), np.asarray(values, dtype=np.float64)))

        return callback

    def _image_callback(self, feature: FeatureContract) -> Any:
        def callback(data: bytes) -> None:
            self.counter.seen(feature.topic, self._elapsed())
            with self._lock:
                self._images[feature.key] = (data, self._now_s())
                self.images_seen[feature.key] += 1

        return callback

    def _report_bad(self, topic: str, reason: str) -> None:
        if self._bad.get(topic) != reason:
            self._bad[topic] = reason
            self.get_logger().warning(f"{topic}: {reason}")
            self.view.log_text("view/problems", self._now_s(), reason, "WARN")

    def _flush_vectors(self) -> None:
        with self._lock:
            batches = {key: samples for key, samples in self._vectors.items() if samples}
            for key in batches:
                self._vectors[key] = []
        for key, samples in batches.items():
            feature = self.contract.features[key]
            names = list(feature.names or feature.joints or ())
            self.view.log_vectors(key, names, [t for t, _ in samples], np.stack([v for _, v in samples]))

    def _image_loop(self) -> None:
        """Decode and log the newest picture per camera every image period, off the executor's thread (so a
        slow decode or JPEG encode never delays the subscriptions)."""
        next_tick = time.monotonic() + self._image_period_s
        while not self._stop.wait(max(0.0, next_tick - time.monotonic())):
            # A fixed-rate schedule: the time spent logging counts towards the period; a late tick is not
            # made up (the newest picture is what matters).
            next_tick = max(next_tick + self._image_period_s, time.monotonic())
            try:
                self._log_images()
            except Exception as err:  # the thread must not die silently: report it and keep viewing
                reason = f"{type(err).__name__}: {err}"
                self.get_logger().error(f"logging images failed: {reason}", throttle_duration_sec=5.0)

    def _log_images(self) -> None:
        with self._lock:
            pending = {key: item for key, item in self._images.items() if item is not None}
            for key in pending:
                self._images[key] = None
        for key, (data, received_s) in pending.items():
            feature = self.contract.features[key]
            msg = deserialize_message(data, import_message_type(feature.type))
            stamp = self._time_of(msg) if self.contract.stamp == "header" else received_s
            try:
                picture = feature.picture(msg) if _matches(feature, msg) else _any_picture(feature, msg)
            except MessageMismatchError as err:
                self._report_bad(feature.topic, str(err))
                continue
            self.view.log_image(key, stamp, picture, depth=feature.dtype == "depth")

    def _log_topics(self) -> None:
        elapsed = self._elapsed()
        self.view.log_document("view/topics", self.counter.table(elapsed), static=False, t_s=self._now_s())
        if elapsed < MISSING_AFTER_S:
            return
        missing = self.counter.missing()
        for topic in sorted(self._announced_missing - set(missing)):
            self._announced_missing.discard(topic)
            self.view.log_text("view/problems", self._now_s(), f"{topic} publishes now", "INFO")
        for topic in missing:
            if topic not in self._announced_missing:
                self._announced_missing.add(topic)
                text = f"no message on {topic} ({self.counter.topics[topic]}) yet: shown as missing"
                self.get_logger().warning(text)
                self.view.log_text("view/problems", self._now_s(), text, "WARN")

    def _on_chunk(self, msg: ActionChunk) -> None:
        self.counter.seen(self._chunk_topic, self._elapsed())
        names = [str(n) for n in msg.names]
        data = np.asarray(msg.data, dtype=np.float64)
        if not names or data.size != int(msg.horizon) * len(names) or msg.horizon == 0:
            self._report_bad(
                "chunk", f"ActionChunk {msg.chunk_id}: {data.size} values for {msg.horizon} x {len(names)}"
            )
            return
        data = data.reshape(int(msg.horizon), len(names))
        labels = names
        if self._action is not None and self._action.joints is not None and set(self._action.joints) <= set(names):
            order = [names.index(j) for j in self._action.joints]
            data = self._action.joint_units().apply(data[:, order])
            labels = list(self._action.names or self._action.joints)
        period_s = float(msg.period.sec) + 1e-9 * float(msg.period.nanosec)
        try:
            chunk = Chunk(_stamp_s(msg.header.stamp), period_s, tuple(labels), data, int(msg.chunk_id))
        except ValueError as err:
            self._report_bad(self._chunk_topic, f"ActionChunk {msg.chunk_id}: {err}")
            return
        self.view.log_chunk_info(chunk.stamp_s, chunk.chunk_id, float(msg.inference_time), period_s * int(msg.horizon))
        self.view.log_chunk_segments(self._overlay.add(chunk))

    def _on_recorder_status(self, msg: RecorderStatus) -> None:
        self.counter.seen(self._status_topic, self._elapsed())
        self.view.log_recorder_status(
            self._time_of(msg),
            state=str(msg.state_name),
            episode_index=int(msg.episode_index),
            frames=int(msg.frames),
            dropped=int(msg.dropped),
            task=str(msg.task),
            message=str(msg.message),
        )

    def _on_episode_start(self, msg: RecorderStatus) -> None:
        self.view.log_episode_boundary(self._time_of(msg), int(msg.episode_index), str(msg.task))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        t_s = self._time_of(msg)
        for status in msg.status:
            values = {str(kv.key): str(kv.value) for kv in status.values}
            level = status.level if isinstance(status.level, int) else int.from_bytes(status.level, "little")
            self.view.log_diagnostic(t_s, str(status.name), level, str(status.message), values)

    def finish(self) -> dict[str, Any]:
        """Flush what is buffered, draw the last chunk; returns per-topic counts (the command prints them)."""
        self._stop.set()
        self._image_thread.join(timeout=10)
        self._flush_vectors()
        self._log_images()
        self.view.log_chunk_segments(self._overlay.finish())
        elapsed = self._elapsed()
        return {
            "seconds": round(elapsed, 3),
            "timeline": ROS_TIME,
            "messages": dict(self.counter.counts),
            "missing": self.counter.missing(),
            "images_logged": self.view.images_logged,
        }


def _matches(feature: FeatureContract, msg: Any) -> bool:
    """True when an Image message has the contract's size (then the contract's own decoding applies)."""
    if feature.type.endswith("CompressedImage"):
        return True
    return (int(msg.height), int(msg.width)) == tuple(feature.shape[:2])


def _any_picture(feature: FeatureContract, msg: Any) -> np.ndarray:
    """A picture of another size than the contract's: shown anyway (the recorder is what refuses it)."""
    from lerobot_contract.images import decode_color, decode_depth

    if feature.dtype == "depth":
        return decode_depth(msg, feature.type, feature.depth_scale_m)
    return decode_color(msg, feature.type)
