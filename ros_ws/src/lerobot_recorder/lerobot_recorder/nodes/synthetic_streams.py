"""Publishes synthetic data on every topic of a contract, at realistic rates: for tests, benches and dry runs.

JointState features get smooth joint trajectories (radians), image features rgb8 pictures whose colour
encodes the message number (so a frame can be traced back to the message it holds). Messages are built
once as CDR bytes (rosbags) and published serialized with a fresh header stamp, so several 640x480 cameras
at 30 fps cost little CPU. Optional faults for tests: pause topics for a while, change the image size,
make the stamps jump back (a sim reset).
"""

from __future__ import annotations

import math
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.typesys import Stores, get_typestore

from lerobot_contract import ContractError, FeatureContract, load_contract
from lerobot_contract.images import encode_image
from lerobot_ros.message_conversion import import_message_type
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_node

_STAMP = struct.Struct("<iI")
CYCLE = 60  # distinct pictures per camera, reused in a loop


def picture_value(index: int) -> int:
    """Grey level of picture `index` (what the recorder's frames can be checked against)."""
    return (index % CYCLE) * 4 + 8


@dataclass(frozen=True)
class SyntheticStreamsParameters:
    """The synthetic streams' parameters, all read-only (README: `python -m lerobot_ros.node_kit markdown <this>`)."""

    contract: str = param("", "contract whose topics to publish")
    joint_rate_hz: float = param(100.0, "rate of JointState topics")
    camera_rate_hz: float = param(30.0, "rate of image topics")
    pause_topics: tuple[str, ...] = param(("",), "topics that fall silent for a while")
    pause_after_s: float = param(0.0, "when the pause starts (s after start)")
    pause_for_s: float = param(0.0, "how long the pause lasts")
    pause_period_s: float = param(0.0, "repeat the pause with this period; 0 = once")
    resize_after_s: float = param(0.0, "from then on, images are half the contract size; 0 = no")
    jump_back_after_s: float = param(0.0, "from then on, stamps are jump_back_s earlier; 0 = no")
    jump_back_s: float = param(0.0, "size of the backwards clock jump")
    jump_period_s: float = param(0.0, "jump back again every this long; 0 = once")
    duration_s: float = param(0.0, "exit after this long; 0 = run until stopped")
    picture_style: str = param(
        "flat", "flat (grey level = message number) or scene (shapes + noise: real encoder load)"
    )


class SyntheticStreams(Node):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__("synthetic_streams")

        self.params = declare_parameters(self, SyntheticStreamsParameters)
        contract = load_contract(self.params.config.contract)
        self._store = get_typestore(Stores.ROS2_KILTED)
        self._start = time.monotonic()
        self.done = False
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._pause_topics = {t for t in self.params.config.pause_topics if t}
        by_topic: dict[str, FeatureContract] = {}
        for feat in contract.features.values():
            by_topic.setdefault(feat.topic, feat)
        for topic, feat in by_topic.items():
            publisher = self.create_publisher(import_message_type(feat.type), topic, qos)
            if feat.is_image:
                rate = float(self.params.config.camera_rate_hz)
                frames = self._pictures(feat, feat.shape[:2])
                small = self._pictures(feat, (feat.shape[0] // 2, feat.shape[1] // 2))
                self.create_timer(1.0 / rate, self._camera_tick(topic, publisher, frames, small))
            else:
                rate = float(self.params.config.joint_rate_hz)
                self.create_timer(1.0 / rate, self._joint_tick(topic, publisher, feat))
        self.get_logger().info(f"publishing {', '.join(by_topic)}")

    def _elapsed(self) -> float:
        return time.monotonic() - self._start

    def _stamp(self) -> tuple[int, int]:
        ns = int(self.get_clock().now().nanoseconds)
        jump_after = float(self.params.config.jump_back_after_s)
        if jump_after > 0 and self._elapsed() >= jump_after:
            period = float(self.params.config.jump_period_s)
            jumps = 1 + (int((self._elapsed() - jump_after) // period) if period > 0 else 0)
            ns -= jumps * round(float(self.params.config.jump_back_s) * 1e9)
        return divmod(ns, 1_000_000_000)

    def _silent(self, topic: str) -> bool:
        duration = float(self.params.config.duration_s)
        if duration > 0 and self._elapsed() >= duration:
            self.done = True
        after, length = float(self.params.config.pause_after_s), float(self.params.config.pause_for_s)
        since = self._elapsed() - after
        period = float(self.params.config.pause_period_s)
        if period > 0 and since >= 0:
            since %= period
        return topic in self._pause_topics and 0 <= since < length

    def _pictures(self, feat: FeatureContract, size: tuple[int, ...]) -> list[bytearray]:
        height, width = int(size[0]), int(size[1])
        out = []
        scene = self.params.config.picture_style == "scene"
        rng = np.random.default_rng(len(feat.key))
        for i in range(CYCLE):
            rgb = np.full((height, width, 3), picture_value(i), dtype=np.uint8)
            rgb[:, :, 1] = np.linspace(0, 255, width, dtype=np.uint8)[None, :]
            if scene:
                x, y = (7 * i) % max(1, width - height // 4), (3 * i) % max(1, height - height // 4)
                rgb[y : y + height // 4, x : x + height // 4] = (200, 60 + 2 * i, 40)
                noisy = rgb.astype(np.int16) + rng.integers(-4, 5, rgb.shape, dtype=np.int16)
                rgb = np.clip(noisy, 0, 255).astype(np.uint8)
            h, w, encoding, step, data = encode_image(rgb, "rgb8")
            msg = self._store.types["sensor_msgs/msg/Image"](
                header=self._header(0, 0, feat.key),
                height=h,
                width=w,
                encoding=encoding,
                is_bigendian=0,
                step=step,
                data=data,
            )
            out.append(bytearray(self._store.serialize_cdr(msg, "sensor_msgs/msg/Image")))
        return out

    def _header(self, sec: int, nsec: int, frame_id: str) -> Any:
        types = self._store.types
        stamp = types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec)
        return types["std_msgs/msg/Header"](stamp=stamp, frame_id=frame_id)

    def _camera_tick(self, topic: str, publisher: Any, frames: list[bytearray], small: list[bytearray]) -> Any:
        count = 0

        def tick() -> None:
            nonlocal count
            if self._silent(topic):
                return
            resize = float(self.params.config.resize_after_s)
            pictures = small if resize > 0 and self._elapsed() >= resize else frames
            raw = pictures[count % CYCLE]
            _STAMP.pack_into(raw, 4, *self._stamp())
            publisher.publish(bytes(raw))
            count += 1

        return tick

    def _joint_tick(self, topic: str, publisher: Any, feat: FeatureContract) -> Any:
        names = list(feat.joints or feat.names or ())
        msg_type = import_message_type(feat.type)

        def tick() -> None:
            if self._silent(topic):
                return
            msg = msg_type()
            sec, nsec = self._stamp()
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nsec
            t = sec + nsec * 1e-9
            msg.name = names
            msg.position = [0.5 * math.sin(0.5 * t + i) for i in range(len(names))]
            msg.velocity = [0.0] * len(names)
            msg.effort = [0.0] * len(names)
            publisher.publish(msg)

        return tick


def main(args: list[str] | None = None) -> int:
    return run_node(
        SyntheticStreams,
        "synthetic_streams",
        args=args,
        finished=lambda node: 0 if node.done else None,
        startup_errors=(ContractError,),
    )


if __name__ == "__main__":
    sys.exit(main())
