"""Dataset episodes -> an mcap bag, so ROS tools can replay a dataset (`lerobot-ros dataset2bag`).

Each contract topic gets one message per frame, stamped (header and bag time) at
``start + episode offset + frame_index / fps``; features sharing a topic (e.g. JointState position and
velocity) fill one message. Values go back to ROS units through the inverse of the contract's converters.
Episodes are separated by `EPISODE_GAP_S` and each starts with a std_msgs/String on `MARKER_TOPIC` holding its
task, so ``bag2dataset --split marker:/lerobot/episode`` recovers the same episodes and tasks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.rosbag2 import StoragePlugin, WriterError
from rosbags.typesys import Stores, get_typestore

from lerobot_bags.errors import BagError
from lerobot_bags.writer import Rosbag2Writer
from lerobot_contract import Contract, FeatureContract
from lerobot_contract.images import COMPRESSED_IMAGE_TYPE, IMAGE_TYPE, encode_image
from lerobot_contract.time import NS

MARKER_TOPIC = "/lerobot/episode"
EPISODE_GAP_S = 2.0
JOINT_STATE = "sensor_msgs/msg/JointState"
ARRAY_TYPES = ("std_msgs/msg/Float64MultiArray", "std_msgs/msg/Float32MultiArray")
SUPPORTED = (JOINT_STATE, IMAGE_TYPE, COMPRESSED_IMAGE_TYPE, *ARRAY_TYPES)


class _MessageFactory:
    """Builds the ROS message of one topic from a frame's values."""

    def __init__(self, ts: Any, topic: str, feats: list[FeatureContract]) -> None:
        self.ts = ts
        self.topic = topic
        self.feats = feats
        self.msgtype = feats[0].type
        if any(f.type != self.msgtype for f in feats):
            raise BagError(f"contract features on {topic} disagree on the message type")
        if self.msgtype not in SUPPORTED:
            raise BagError(f"dataset2bag cannot build {self.msgtype} messages ({topic}); supported: {SUPPORTED}")
        if self.msgtype in (IMAGE_TYPE, COMPRESSED_IMAGE_TYPE) and len(feats) != 1:
            raise BagError(f"{topic}: one image feature per topic")
        if self.msgtype == JOINT_STATE:
            joint_sets = {f.joints or tuple(f.dataset_names or ()) for f in feats}
            if len(joint_sets) != 1:
                raise BagError(f"{topic}: features on one JointState topic must list the same joints")
            self.joint_names = list(joint_sets.pop())
            bad = [f.field for f in feats if f.field not in ("position", "velocity", "effort")]
            if bad:
                raise BagError(f"{topic}: JointState field {bad[0]!r} cannot be written; use position/velocity/effort")

    def header(self, stamp_ns: int, frame_id: str = "") -> Any:
        time_msg = self.ts.types["builtin_interfaces/msg/Time"](sec=stamp_ns // NS, nanosec=stamp_ns % NS)
        return self.ts.types["std_msgs/msg/Header"](stamp=time_msg, frame_id=frame_id)

    def build(self, item: dict[str, Any], stamp_ns: int) -> Any:
        types = self.ts.types
        if self.msgtype == JOINT_STATE:
            fields: dict[str, Any] = {"position": np.zeros(0), "velocity": np.zeros(0), "effort": np.zeros(0)}
            for feat in self.feats:
                values = np.asarray(item[feat.key], dtype=np.float64)
                fields[str(feat.field)] = feat.joint_units().inverse(values)
            return types[JOINT_STATE](header=self.header(stamp_ns), name=self.joint_names, **fields)
        feat = self.feats[0]
        if self.msgtype in ARRAY_TYPES:
            values = feat.joint_units().inverse(np.asarray(item[feat.key], dtype=np.float64))
            dtype = np.float64 if self.msgtype.endswith("64MultiArray") else np.float32
            layout = types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
            return types[self.msgtype](layout=layout, data=values.astype(dtype))
        picture = np.asarray(item[feat.key])
        if feat.dtype == "depth":
            depth = picture.reshape(feat.shape).astype("<f4")
            return types[IMAGE_TYPE](
                header=self.header(stamp_ns),
                height=feat.shape[0],
                width=feat.shape[1],
                encoding="32FC1",
                is_bigendian=0,
                step=feat.shape[1] * 4,
                data=depth.view(np.uint8).reshape(-1),
            )
        if self.msgtype == COMPRESSED_IMAGE_TYPE:
            import cv2

            ok, png = cv2.imencode(".png", picture[:, :, ::-1])
            if not ok:
                raise BagError(f"{self.topic}: PNG encoding failed")
            return types[COMPRESSED_IMAGE_TYPE](header=self.header(stamp_ns), format="png", data=png.reshape(-1))
        height, width, encoding, step, data = encode_image(picture, "rgb8")
        return types[IMAGE_TYPE](
            header=self.header(stamp_ns),
            height=height,
            width=width,
            encoding=encoding,
            is_bigendian=0,
            step=step,
            data=data,
        )


def dataset_to_bag(
    root: Path,
    output: Path,
    contract: Contract,
    *,
    episodes: Sequence[int] | None = None,
    start_s: float | None = None,
) -> dict[str, Any]:
    """Write the chosen episodes of the dataset at `root` as an mcap bag at `output` (a new folder)."""
    from lerobot_dataset import DatasetReader

    output = Path(output)
    if output.exists():
        raise BagError(f"{output} exists; dataset2bag writes a new bag folder")
    ts = get_typestore(Stores.ROS2_HUMBLE)
    by_topic: dict[str, list[FeatureContract]] = {}
    for feat in contract.features.values():
        by_topic.setdefault(feat.topic, []).append(feat)
    factories = [_MessageFactory(ts, topic, feats) for topic, feats in by_topic.items()]
    with DatasetReader(root) as reader:
        missing = [k for k in contract.features if k not in reader.features]
        if missing:
            raise BagError(f"{root} has no feature(s) {missing} named by the contract {contract.source}")
        if reader.fps != contract.fps:
            raise BagError(f"{root} is {reader.fps} fps but the contract says {contract.fps}")
        chosen = list(range(reader.num_episodes)) if episodes is None else list(episodes)
        bad = [e for e in chosen if not 0 <= e < reader.num_episodes]
        if bad:
            raise BagError(f"episode(s) {bad} do not exist; {root} has {reader.num_episodes}")
        messages = 0
        start_ns = round((time.time() if start_s is None else start_s) * NS)
        writer = Rosbag2Writer(output, version=9, storage_plugin=StoragePlugin.MCAP)
        try:
            with writer:
                conns = {f.topic: writer.add_connection(f.topic, f.msgtype, typestore=ts) for f in factories}
                marker = writer.add_connection(MARKER_TOPIC, "std_msgs/msg/String", typestore=ts)
                string = ts.types["std_msgs/msg/String"]
                episode_start = start_ns
                for episode in chosen:
                    first, last = reader.episode_range(episode)
                    for row in range(first, last):
                        item = reader[row]
                        stamp = episode_start + (2 * int(item["frame_index"]) * NS + reader.fps) // (2 * reader.fps)
                        if row == first:
                            text = string(data=item["task"])
                            writer.write(marker, stamp, ts.serialize_cdr(text, "std_msgs/msg/String"))
                            messages += 1
                        for factory in factories:
                            msg = factory.build(item, stamp)
                            writer.write(conns[factory.topic], stamp, ts.serialize_cdr(msg, factory.msgtype))
                            messages += 1
                    episode_start += round(((last - first) / reader.fps + EPISODE_GAP_S) * NS)
        except WriterError as err:
            raise BagError(f"cannot write {output}: {err}") from None
    return {"episodes": len(chosen), "messages": messages, "topics": [*by_topic, MARKER_TOPIC]}
