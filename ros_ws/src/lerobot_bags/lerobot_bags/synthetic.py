"""Synthetic rosbag2 bags for tests and benchmarks, written with rosbags' writer.

A bag holds what a LeRobot arm setup publishes: `JointState` on /follower/joint_states and
/follower/joint_commands (100 Hz by default), cameras as `Image` (/cameras/<name>/image_raw) or
`CompressedImage` (/cameras/<name>/image_raw/compressed) at 30 fps, header stamps with jitter, receive
stamps a little later. Values are functions of the header stamp (`joint_positions`, `camera_pixels`), so
tests can recompute what any frame must hold.
"""

from __future__ import annotations

import functools
import heapq
import math
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
from rosbags.typesys import Stores, get_typestore

from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_ros import images

SO101_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
STATE_TOPIC = "/follower/joint_states"
COMMAND_TOPIC = "/follower/joint_commands"


def camera_topic(name: str, compressed: bool = False) -> str:
    """Topic of a synthetic camera."""
    return f"/cameras/{name}/image_raw" + ("/compressed" if compressed else "")


@dataclass(frozen=True)
class SyntheticBagSpec:
    """What to put in a synthetic bag."""

    duration_s: float = 2.0
    joint_hz: float = 100.0
    camera_hz: float = 30.0
    cameras: Sequence[str] = ("front", "wrist")
    compressed: Sequence[str] = ()  # camera names published as CompressedImage (JPEG) instead of Image
    height: int = 480
    width: int = 640
    encoding: str = "rgb8"  # rgb8, bgr8, mono8 or 16UC1
    joints: Sequence[str] = SO101_JOINTS
    jitter_s: float = 0.002
    latency_s: float = 0.004
    start_ns: int = 1_700_000_000 * NS
    storage: str = "mcap"  # or sqlite3
    compression: str = "none"  # none, file or message (zstd)
    commands: bool = True
    task_topic: str | None = None
    tasks: Sequence[tuple[float, str]] = ()  # (time offset s, task text) published on task_topic
    seed: int = 0
    noise: float = 0.0  # sensor noise std of the camera pictures (see camera_pixels)
    extra: dict[str, Any] = field(default_factory=dict)


def joint_positions(t_s: float, joints: int, command: bool = False) -> npt.NDArray[np.float64]:
    """The joint positions (rad) the synthetic robot has at time `t_s` (commands lead by 0.05 rad)."""
    phase = np.arange(joints, dtype=np.float64)
    out = 0.5 * np.sin(2 * math.pi * 0.2 * t_s + phase)
    return out + 0.05 if command else out


def camera_pixels(frame: int, cam_index: int, height: int, width: int, noise: float = 0.0) -> npt.NDArray[np.uint8]:
    """The RGB picture camera `cam_index` takes as its `frame`-th image (smooth, varies with frame).

    `noise` > 0 adds deterministic Gaussian sensor noise of that standard deviation (grey levels), which makes
    frames as hard to compress as a real camera's.
    """
    x = np.arange(width, dtype=np.int64)[None, :]
    y = np.arange(height, dtype=np.int64)[:, None]
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:, :, 0] = (x // 2 + frame * 3) % 256
    img[:, :, 1] = (y // 2 + frame) % 256
    img[:, :, 2] = (cam_index * 80 + frame * 5) % 256
    if noise > 0:
        grain = _grain(height, width, noise, (frame * 7 + cam_index) % GRAIN_PLANES)
        img = np.clip(img.astype(np.int16) + grain, 0, 255).astype(np.uint8)
    return img


GRAIN_PLANES = 8


@functools.lru_cache(maxsize=GRAIN_PLANES * 2)
def _grain(height: int, width: int, noise: float, plane: int) -> npt.NDArray[np.int16]:
    """One of a few fixed noise planes (drawn once: drawing per frame costs more than the rest of the bag)."""
    rng = np.random.default_rng(plane)
    return np.round(rng.normal(0.0, noise, size=(height, width, 1))).astype(np.int16)


def _stamp_msg(ts: Any, stamp_ns: int, frame_id: str) -> Any:
    time = ts.types["builtin_interfaces/msg/Time"](sec=stamp_ns // NS, nanosec=stamp_ns % NS)
    return ts.types["std_msgs/msg/Header"](stamp=time, frame_id=frame_id)


def _grid(spec: SyntheticBagSpec, hz: float, rng: np.random.Generator) -> Iterator[tuple[int, int, int]]:
    """(index, header stamp ns, receive stamp ns) for a stream at `hz` with jitter."""
    count = int(spec.duration_s * hz) + 1
    last = -1
    for i in range(count):
        nominal = spec.start_ns + round(i * NS / hz)
        jitter = round(rng.uniform(-spec.jitter_s, spec.jitter_s) * NS) if i else 0
        stamp = max(nominal + jitter, last + 1)
        last = stamp
        yield i, stamp, stamp + round(spec.latency_s * NS * (1 + rng.uniform(0, 0.5)))


def _messages(spec: SyntheticBagSpec, ts: Any) -> Iterator[tuple[int, str, Any]]:
    """(receive ns, topic, message) in receive order."""
    rng = np.random.default_rng(spec.seed)
    streams: list[Iterator[tuple[int, str, Any]]] = []

    def joints(topic: str, command: bool, seed: int) -> Iterator[tuple[int, str, Any]]:
        local = np.random.default_rng(seed)
        for _, stamp, recv in _grid(spec, spec.joint_hz, local):
            t = (stamp - spec.start_ns) / NS
            pos = joint_positions(t, len(spec.joints), command)
            msg = ts.types["sensor_msgs/msg/JointState"](
                header=_stamp_msg(ts, stamp, "base_link"),
                name=list(spec.joints),
                position=pos,
                velocity=np.zeros(len(spec.joints)),
                effort=np.zeros(0),
            )
            yield recv, topic, msg

    def camera(cam: int, name: str, seed: int) -> Iterator[tuple[int, str, Any]]:
        local = np.random.default_rng(seed)
        compressed = name in spec.compressed
        for i, stamp, recv in _grid(spec, spec.camera_hz, local):
            yield recv, camera_topic(name, compressed), _image(spec, ts, stamp, i, cam, compressed, name)

    streams.append(joints(STATE_TOPIC, False, int(rng.integers(1 << 30))))
    if spec.commands:
        streams.append(joints(COMMAND_TOPIC, True, int(rng.integers(1 << 30))))
    for cam, name in enumerate(spec.cameras):
        streams.append(camera(cam, name, int(rng.integers(1 << 30))))
    if spec.task_topic:
        string = ts.types["std_msgs/msg/String"]
        streams.append(
            iter([(spec.start_ns + round(off * NS), spec.task_topic, string(data=text)) for off, text in spec.tasks])
        )
    yield from heapq.merge(*streams, key=lambda item: item[0])


def _image(spec: SyntheticBagSpec, ts: Any, stamp: int, i: int, cam: int, compressed: bool, name: str) -> Any:
    header = _stamp_msg(ts, stamp, f"{name}_optical")
    rgb = camera_pixels(i, cam, spec.height, spec.width, spec.noise)
    if compressed:
        jpeg = np.frombuffer(images.encode_jpeg(rgb, 90), dtype=np.uint8)
        return ts.types["sensor_msgs/msg/CompressedImage"](header=header, format="jpeg", data=jpeg)
    if spec.encoding == "16UC1":
        fields = images.array_to_image(rgb[:, :, 0].astype(np.uint16) * 10, "16UC1")
    elif spec.encoding == "mono8":
        fields = images.array_to_image(np.ascontiguousarray(rgb[:, :, 0]), "mono8")
    else:
        fields = images.rgb_to_image(rgb, spec.encoding)
    data, step = fields.data, fields.step
    return ts.types["sensor_msgs/msg/Image"](
        header=header,
        height=spec.height,
        width=spec.width,
        encoding=spec.encoding,
        is_bigendian=0,
        step=step,
        data=data,
    )


def png_declaring(height: int, width: int) -> bytes:
    """A PNG whose header declares a `height` x `width` mono image but whose data holds only its first rows: the
    shape of a decompression bomb (a few hundred bytes that a decoder would expand to height x width pixels), for
    tests of checks that must not decode it."""
    raw = zlib.compress(b"\0" * (width + 1) * 16, 9)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def write_synthetic_bag(path: str | Path, spec: SyntheticBagSpec = SyntheticBagSpec()) -> Path:
    """Write a rosbag2 bag directory at `path` (must not exist) and return it."""
    path = Path(path)
    ts = get_typestore(Stores.ROS2_HUMBLE)
    plugin = StoragePlugin.MCAP if spec.storage == "mcap" else StoragePlugin.SQLITE3
    writer = Writer(path, version=9, storage_plugin=plugin)
    if spec.compression != "none":
        mode = CompressionMode.FILE if spec.compression == "file" else CompressionMode.MESSAGE
        writer.set_compression(mode, CompressionFormat.ZSTD)
    conns: dict[str, Any] = {}
    with writer:
        for recv, topic, msg in _messages(spec, ts):
            conn = conns.get(topic)
            if conn is None:
                conn = conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=ts)
            writer.write(conn, recv, ts.serialize_cdr(msg, msg.__msgtype__))
    return path


def contract_for(
    spec: SyntheticBagSpec,
    *,
    camera_dtype: str = "image",
    fps: int = 30,
    stamp: str = "header",
    max_age_s: float | None = 0.1,
    extra: dict[str, Any] | None = None,
) -> Contract:
    """A contract for a synthetic bag: SO-101 joints (deg, gripper 0..100) and its cameras as `camera_dtype`."""
    age = {} if max_age_s is None else {"max_age_s": max_age_s}
    joint = {
        "type": "sensor_msgs/msg/JointState",
        "field": "position",
        "joints": list(SO101_JOINTS),
        "names": [f"{j}.pos" for j in SO101_JOINTS],
        "units": "so101",
        **age,
    }
    features: dict[str, Any] = {"observation.state": {"topic": "/follower/joint_states", **joint}}
    if spec.commands:
        features["action"] = {"topic": "/follower/joint_commands", **joint}
    for name in spec.cameras:
        compressed = name in spec.compressed
        features[f"observation.images.{name}"] = {
            "topic": camera_topic(name, compressed),
            "type": "sensor_msgs/msg/CompressedImage" if compressed else "sensor_msgs/msg/Image",
            "shape": [spec.height, spec.width] if camera_dtype == "depth" else [spec.height, spec.width, 3],
            "dtype": camera_dtype,
            **age,
        }
    features.update(extra or {})
    return Contract.from_dict(
        {
            "robot_type": "so101_follower",
            "fps": fps,
            "stamp": stamp,
            "units": {
                "gripper": {"kind": "range", "in": [-0.6, 0.6], "out": [0, 100]},
                "so101": {"kind": "per_joint", "default": "rad_to_deg", "joints": {"gripper": "gripper"}},
            },
            "features": features,
        },
        source="<test contract>",
    )
