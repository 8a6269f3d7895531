"""A private ROS 2 connection to the topics of some contract features, for LeRobot devices.

`ContractLink` owns its rclpy `Context` and one node, so a LeRobot script (or a caller that runs rclpy itself) is
not disturbed: nothing touches rclpy's default context. Messages are stored in the policy node's
`ObservationAssembler`, which applies the project's alignment rule (`lerobot_contract.sampler.LiveSampler`: frames
on the contract's fps grid, per feature the newest sample stamped at or before the frame time, dropped when older
than `max_age_s` or spread beyond `sync_tolerance_s`); `newest_frame()` gives the newest such frame, decoded by the
same `FrameDecoder` as the recorder.

No thread spins the node. Each `newest_frame()` first takes, on the caller's thread, every message the middleware
has received since the last call, in the order it received them and with the time it received them, so a frame
holds every sample delivered before the read. A spinning thread would put its own wake-up between delivery and
the frame: it needs the GIL, which LeRobot's loop holds while it works, and a core, which a busy host does not
give it at once (measured beside two 640x480 cameras, 30 Hz reads and a loaded host: p99 38-48 ms from delivery
to the callback, frames released without their image and dropped for `sync_tolerance_s`). What is received
between two reads waits in the subscriptions' queues (`VECTOR_DEPTH`, `IMAGE_DEPTH`: the newest are kept).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract import Contract
from lerobot_contract.align import AlignedFrame
from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ObservationError
from lerobot_policy_node.core.observations import ObservationAssembler, contract_inputs
from lerobot_policy_node.core.policies import TIMESTAMP_KEY

# Sensor streams, best effort (what the drivers and the policy node use). What arrives between two reads waits in
# these queues: 10 covers 100 ms of a 100 Hz joint stream, 2 the image a 30 Hz read needs and the one before it.
VECTOR_DEPTH = 10
IMAGE_DEPTH = 2
SPIN_POLL_S = 0.02


class ReadAges:
    """How old the samples that reads returned were when read (1 ms bins up to `max_s`; older ones in the last)."""

    def __init__(self, max_s: float = 10.0) -> None:
        self._bins: npt.NDArray[np.int64] = np.zeros(round(max_s * 1000) + 1, dtype=np.int64)

    def add(self, age_s: float) -> None:
        self._bins[min(max(int(age_s * 1000), 0), len(self._bins) - 1)] += 1

    @property
    def count(self) -> int:
        return int(self._bins.sum())

    def quantile_s(self, q: float) -> float:
        """The age below which a share `q` of the reads lies (upper edge of its bin; 0 before any read)."""
        if not self.count:
            return 0.0
        return (int(np.searchsorted(np.cumsum(self._bins), q * self.count)) + 1) / 1000

    def share_over(self, limit_s: float) -> float:
        """The share of reads older than `limit_s` (to the bin: ages within 1 ms of it count as not older)."""
        return float(self._bins[round(limit_s * 1000) :].sum() / self.count) if self.count else 0.0


@dataclass(frozen=True)
class SamplingCounts:
    """What the link's alignment did since it opened: frames kept and dropped, samples that came too late."""

    frames_kept: int
    dropped_stale: int
    dropped_out_of_sync: int
    late_samples: int


def _unused(msg: Any) -> None:
    """The callback of subscriptions that are never spun."""


class RosLinkError(ConnectionError):
    """The ROS side cannot give what the device needs (no data on a topic, stale data, closed link); one line."""


class ContractLink:
    """Subscribes to the topics of `keys` (contract features) and keeps their newest aligned frame.

    Args:
        contract: the robot contract.
        keys: the features to read (each needs a topic in the contract).
        name: the node's name (a suffix makes it unique).
        latency_s: how long a frame waits for a late sample before it is judged with what came.
    """

    def __init__(self, contract: Contract, keys: Sequence[str], name: str, latency_s: float = 0.01) -> None:
        self.contract = contract
        self.keys = tuple(keys)
        self._name = f"{name}_{id(self):x}"
        self._latency_s = latency_s
        self._lock = threading.Lock()
        self._context: Any = None
        self._subscriptions: list[tuple[str, Any]] = []
        self.node: Any = None
        self._assembler: ObservationAssembler | None = None
        self._publishers: dict[str, Any] = {}

    @property
    def is_open(self) -> bool:
        return self.node is not None

    def open(self, timeout_s: float) -> None:
        """Start the node and wait for the first aligned frame (RosLinkError naming the silent topics)."""
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions

        from lerobot_ros.dds import apply_ros_environment
        from lerobot_ros.message_conversion import import_message_type

        inputs = contract_inputs(self.contract, dict.fromkeys(self.keys, ()))
        self._assembler = ObservationAssembler(self.contract, inputs, latency_s=self._latency_s)
        apply_ros_environment()
        self._context = rclpy.Context()
        # No signal handlers: the script that uses the device owns SIGINT (LeRobot's scripts stop on the
        # KeyboardInterrupt and then disconnect; rclpy's handler would shut this context down under them).
        rclpy.init(context=self._context, signal_handler_options=SignalHandlerOptions.NO)
        try:
            self.node = rclpy.create_node(self._name, context=self._context)
            for topic, keys in self._assembler.topics.items():
                feature = self.contract.features[keys[0]]
                depth = IMAGE_DEPTH if feature.is_image else VECTOR_DEPTH
                qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.BEST_EFFORT)
                # Never spun: `_take_received` takes its messages (the callback is rclpy's required argument).
                subscription = self.node.create_subscription(import_message_type(feature.type), topic, _unused, qos)
                self._subscriptions.append((topic, subscription))
            self._wait_first_frame(timeout_s)
        except BaseException:
            self.close()
            raise

    def _take_received(self) -> None:
        """Push every message received since the last call into the assembler, in reception order (under the lock).

        A message's receive time is when the middleware received it (its `received_timestamp`, on the system
        clock), moved onto this node's clock; the stamp is its header's, or that receive time with `stamp: receive`.
        """
        assert self._assembler is not None
        now_ns, system_ns = self.now_ns(), time.time_ns()
        taken: list[tuple[int, int, str, Any]] = []
        for order, (topic, subscription) in enumerate(self._subscriptions):
            with subscription.handle:
                while (got := subscription.handle.take_message(subscription.msg_type, subscription.raw)) is not None:
                    msg, info = got
                    received = int(info.get("received_timestamp", 0))
                    # A middleware that leaves it unset (0) or a clock step: taken as received now.
                    waited = system_ns - received if 0 < received <= system_ns else 0
                    taken.append((now_ns - waited, order, topic, msg))
        taken.sort(key=lambda item: item[:2])  # reception order; one topic's messages keep theirs
        from_header = self.contract.stamp == "header"
        for receive, _, topic, msg in taken:
            stamp = msg.header.stamp.sec * NS + msg.header.stamp.nanosec if from_header else receive
            self._assembler.push(topic, msg, stamp, receive)

    def _wait_first_frame(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.newest_frame() is None:
            if time.monotonic() > deadline:
                raise RosLinkError(f"no aligned frame within {timeout_s:g} s: {self.waiting()}")
            time.sleep(SPIN_POLL_S)

    def waiting(self) -> str:
        """What the link still waits for, in one line."""
        assert self._assembler is not None
        with self._lock:
            silent = self._assembler.waiting_for
            problem = self._assembler.stats.last_problem
        if silent:
            topics = ", ".join(f"{self.contract.features[k].topic} ({k})" for k in silent)
            return (
                f"no message on {topics} (contract {self.contract.source}); is the robot stack running, in this "
                "ROS_DOMAIN_ID, and are these its topics?"
            )
        return problem or (
            "every topic has data, but no frame passed the contract's max_age_s / sync_tolerance_s checks "
            f"(contract {self.contract.source}); are the streams' stamps on one clock?"
        )

    def sample_age_s(self, frame: AlignedFrame, key: str) -> float:
        """How old the sample of `key` in `frame` is now, on the stamps' clock."""
        return (self.stamp_now_ns() - frame.picks[key].stamp_ns) / NS

    def counts(self) -> SamplingCounts:
        """The alignment's counters since the link opened."""
        assert self._assembler is not None
        with self._lock:
            report, live = self._assembler.sampling
            return SamplingCounts(
                report.frames_kept, report.frames_dropped_stale, report.frames_dropped_tolerance, live.late_samples
            )

    def now_ns(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def newest_frame(self) -> AlignedFrame | None:
        """The newest aligned frame released by now, with every message received before this call (None before
        the first)."""
        with self._lock:
            if self._assembler is None or self.node is None:
                raise RosLinkError("the ROS link is closed; connect() first")
            self._take_received()
            self._assembler.poll(self.now_ns())
            return self._assembler.newest()

    def frame_age_s(self, frame: AlignedFrame) -> float:
        """How old `frame` is now, on the stamps' clock."""
        assert self._assembler is not None
        with self._lock:
            return (self._assembler.stamp_clock(self.now_ns()) - frame.time_ns) / NS

    def stamp_now_ns(self) -> int:
        """This node's clock now, on the stamps' clock (to stamp what is sent in answer)."""
        assert self._assembler is not None
        with self._lock:
            return self._assembler.stamp_clock(self.now_ns())

    def values(self, frame: AlignedFrame) -> dict[str, Any]:
        """Contract key -> value (dataset units) of every feature of `frame`, decoded as the recorder does."""
        assert self._assembler is not None
        try:
            with self._lock:
                built = self._assembler.build(frame)
        except ObservationError as err:
            raise RosLinkError(str(err)) from None
        built.pop(TIMESTAMP_KEY, None)
        return built

    def publisher(self, msg_type: Any, topic: str) -> Any:
        """A reliable publisher on `topic` (one per topic)."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        if topic not in self._publishers:
            qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            self._publishers[topic] = self.node.create_publisher(msg_type, topic, qos)
        return self._publishers[topic]

    def matched_publisher(self, msg_type: Any, topic: str, timeout_s: float) -> Any:
        """`publisher(topic)` once it is matched with every subscriber the graph knows (at least one): what is
        published before a subscription matched is lost to it (RosLinkError when nobody subscribes in time)."""
        publisher = self.publisher(msg_type, topic)
        deadline = time.monotonic() + timeout_s
        while not 0 < self.node.count_subscribers(topic) <= publisher.get_subscription_count():
            if time.monotonic() > deadline:
                raise RosLinkError(
                    f"nobody subscribes to {topic} within {timeout_s:g} s (contract {self.contract.source}); is the "
                    "robot's driver running, in this ROS_DOMAIN_ID, and is this its command topic?"
                )
            time.sleep(SPIN_POLL_S)
        return publisher

    def close(self) -> None:
        """Destroy the node and shut the link's context down (idempotent)."""
        with self._lock:  # not while another thread takes messages
            self._subscriptions = []
            if self.node is not None:
                self.node.destroy_node()
            if self._context is not None:
                self._context.try_shutdown()
            self.node = self._context = None
            self._publishers = {}
