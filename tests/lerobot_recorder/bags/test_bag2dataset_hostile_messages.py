"""bag2dataset on messages that are legal but unusual, or damaged one by one (issue 30):

* CDR as rmw_serialize writes it (trailing bytes past the fields) converts;
* a topic whose type changes mid-bag: each message decoded with its own type, the others skipped and counted,
  the coverage truthful; nothing of the contract's type left: one line;
* equal stamps: exact duplicates dropped (the grid phase unchanged), conflicting samples: the later one wins;
* damaged images (garbage JPEG, 0x0, an rgb8 step that says mono, a 20000x20000 PNG) dropped one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bag_helpers import convert
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from lerobot_bags.errors import BagError
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for, joint_positions, png_declaring
from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_dataset import DatasetReader

TOPIC = "/follower/joint_states"
BASE = 1_700_000_000 * NS
STORE = get_typestore(Stores.ROS2_HUMBLE)
T = STORE.types
MakeBag = Callable[..., Path]


def _joint_state(stamp: int, values: Any, names: tuple[str, ...] = ("a", "b")) -> Any:
    header = T["std_msgs/msg/Header"](
        stamp=T["builtin_interfaces/msg/Time"](sec=stamp // NS, nanosec=stamp % NS), frame_id="base"
    )
    return T["sensor_msgs/msg/JointState"](
        header=header, name=list(names), position=np.asarray(values, float), velocity=np.zeros(0), effort=np.zeros(0)
    )


def _write(path: Path, messages: Iterator[tuple[str, str, int, bytes]]) -> Path:
    """A bag of (topic, type, receive stamp, raw CDR) in order; one connection per topic and type."""
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns: dict[tuple[str, str], Any] = {}
        for topic, msgtype, stamp, raw in messages:
            if (topic, msgtype) not in conns:
                conns[topic, msgtype] = writer.add_connection(topic, msgtype, typestore=STORE)
            writer.write(conns[topic, msgtype], stamp, raw)
    return path


def _rewrite(src: Path, dst: Path, change: Callable[[str, str, int, bytes], list[tuple[str, int, bytes]]]) -> Path:
    """A copy of bag `src` where each message (topic, type, receive stamp, raw) becomes what `change` returns:
    [(type, receive stamp, raw), ...] (none to leave it out, several to add messages)."""

    def messages() -> Iterator[tuple[str, str, int, bytes]]:
        with Reader(src) as reader:
            for conn, stamp, raw in reader.messages():
                for msgtype, new_stamp, new_raw in change(conn.topic, conn.msgtype, stamp, bytes(raw)):
                    yield conn.topic, msgtype, new_stamp, new_raw

    return _write(dst, messages())


def _contract(fps: int = 10) -> Contract:
    return Contract.from_dict(
        {
            "robot_type": "two_joints",
            "fps": fps,
            "features": {
                "observation.state": {
                    "topic": TOPIC,
                    "type": "sensor_msgs/msg/JointState",
                    "joints": ["a", "b"],
                    "units": "identity",
                }
            },
        }
    )


def _positions(root: Path, key: str = "observation.state") -> np.ndarray:
    with DatasetReader(root) as reader:
        return np.stack([reader[i][key] for i in range(len(reader))])


def test_rmw_serialized_joint_states_convert(tmp_path: Path) -> None:
    """rclpy's serialize_message leaves 8 bytes past a JointState's fields (empty velocity and effort): all 101
    messages used to be refused as malformed CDR (size mismatch), 0 episodes."""
    serialization = pytest.importorskip("rclpy.serialization")
    from sensor_msgs.msg import JointState

    def messages() -> Iterator[tuple[str, str, int, bytes]]:
        for k in range(101):
            stamp = BASE + k * 10_000_000
            msg = JointState(name=["a", "b"], position=joint_positions(k / 100, 2).tolist())
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, NS)
            msg.header.frame_id = "base"
            raw = bytes(serialization.serialize_message(msg))
            assert (
                len(raw)
                == len(bytes(STORE.serialize_cdr(_joint_state(stamp, [0, 0]), "sensor_msgs/msg/JointState"))) + 8
            )
            yield TOPIC, "sensor_msgs/msg/JointState", stamp + 1_000_000, raw

    bag = _write(tmp_path / "bag", messages())
    result = convert([bag], _contract(), tmp_path / "ds")
    assert not result.failed and len(result.episodes) == 1, result.failed
    assert result.bags[0]["refused_messages"] == {}
    expected = np.stack([joint_positions(i / 10, 2) for i in range(11)])
    np.testing.assert_allclose(_positions(tmp_path / "ds"), expected, atol=1e-6)


def _type_change(path: Path, second: str, change_at: int = 50) -> Path:
    """JointState on TOPIC at 100 Hz for 1 s, from message `change_at` on of type `second` instead."""

    def messages() -> Iterator[tuple[str, str, int, bytes]]:
        for k in range(101):
            stamp = BASE + k * 10_000_000
            header = T["std_msgs/msg/Header"](
                stamp=T["builtin_interfaces/msg/Time"](sec=stamp // NS, nanosec=stamp % NS), frame_id="x"
            )
            if k < change_at:
                msg: Any = _joint_state(stamp, joint_positions(k / 100, 2))
            elif second == "std_msgs/msg/Float64MultiArray":
                msg = T[second](layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0), data=np.ones(2))
            else:
                msg = T[second](
                    header=header,
                    height=1,
                    width=1,
                    encoding="rgb8",
                    is_bigendian=0,
                    step=3,
                    data=np.zeros(3, np.uint8),
                )
            yield TOPIC, msg.__msgtype__, stamp + 1_000_000, bytes(STORE.serialize_cdr(msg, msg.__msgtype__))

    return _write(path, messages())


@pytest.mark.parametrize("second", ["std_msgs/msg/Float64MultiArray", "sensor_msgs/msg/Image"])
def test_a_topic_that_changes_type_mid_bag_is_refused_by_default(tmp_path: Path, second: str) -> None:
    """Issue #38: a type change mid-bag was converted (with a warning) and bag2dataset exited 0 with half the
    frames; now the bag is refused in one line naming the option, and nothing is written."""
    bag = _type_change(tmp_path / "bag", second)
    with pytest.raises(BagError) as caught:
        convert([bag], _contract(), tmp_path / "ds")
    message = str(caught.value)
    assert "\n" not in message
    assert f"{TOPIC} changes type in the bag (50 sensor_msgs/msg/JointState, the contract's type, and 51 {second})" in (
        message
    )
    assert "--allow-type-change" in message
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("second", ["std_msgs/msg/Float64MultiArray", "sensor_msgs/msg/Image"])
def test_a_topic_that_changes_type_mid_bag_converts_its_part_with_allow_type_change(
    tmp_path: Path, second: str
) -> None:
    """The messages of the contract's type convert; the others are skipped, counted, warned, and the coverage
    says what is missing."""
    bag = _type_change(tmp_path / "bag", second)
    result = convert([bag], _contract(), tmp_path / "ds", allow_type_change=True)
    assert not result.failed, result.failed
    (episode,) = result.episodes
    assert episode["frames"] == 5  # 0.0 .. 0.4 s; the last JointState is at 0.49 s
    assert episode["frames_dropped_unusable"] == 6  # 0.5 .. 1.0 s only had messages of the other type
    assert episode["coverage"] == pytest.approx(5 / 11, abs=1e-6)
    assert episode["features"]["observation.state"]["unusable"] == 51
    bag_info = result.bags[0]
    assert bag_info["skipped_other_type"] == {TOPIC: {second: 51}}
    assert bag_info["refused_messages"] == {}
    warnings = [w for w in bag_info["warnings"] if "changed type" in w]
    assert warnings == [
        f"{TOPIC}: skipped 51 message(s) of type {second}, the contract expects sensor_msgs/msg/JointState "
        "(the topic changed type in the bag)"
    ]
    expected = np.stack([joint_positions(i / 10, 2) for i in range(5)])
    np.testing.assert_allclose(_positions(tmp_path / "ds"), expected, atol=1e-6)


def test_a_topic_with_nothing_of_the_contracts_type(tmp_path: Path) -> None:
    bag = _type_change(tmp_path / "bag", "std_msgs/msg/Float64MultiArray", change_at=0)
    with pytest.raises(BagError) as caught:
        convert([bag], _contract(), tmp_path / "ds")
    message = str(caught.value)
    assert "\n" not in message
    assert (
        f"topic {TOPIC} carries std_msgs/msg/Float64MultiArray, the contract expects sensor_msgs/msg/JointState"
        in message
    )
    assert not (tmp_path / "ds").exists()


def test_equal_stamps_conflicting_samples_the_later_wins(tmp_path: Path) -> None:
    """Message 20 is sent twice with one stamp: the second, with other values, is taken (and counted)."""

    def messages() -> Iterator[tuple[str, str, int, bytes]]:
        for k in range(101):
            stamp = BASE + k * 10_000_000
            for values in [joint_positions(k / 100, 2)] + ([np.array([7.0, 8.0])] if k == 20 else []):
                yield (
                    TOPIC,
                    "sensor_msgs/msg/JointState",
                    stamp + 1_000_000,
                    bytes(STORE.serialize_cdr(_joint_state(stamp, values), "sensor_msgs/msg/JointState")),
                )

    result = convert([_write(tmp_path / "bag", messages())], _contract(), tmp_path / "ds")
    (episode,) = result.episodes
    assert episode["features"]["observation.state"]["equal_stamp_conflicts"] == 1
    assert result.bags[0]["equal_stamps"] == {TOPIC: {"duplicates": 0, "conflicting": 1}}
    assert f"{TOPIC}: 1 conflicting samples with equal stamps (the later one is kept)" in result.bags[0]["warnings"]
    np.testing.assert_allclose(_positions(tmp_path / "ds")[2], [7.0, 8.0])


def test_exact_duplicates_are_dropped_and_leave_the_grid_alone(make_bag: MakeBag, tmp_path: Path) -> None:
    """Every message recorded twice: 9 of 30 frames used to show their camera's previous image (the duplicates
    made the grid phase unmeasurable), reported only as "reused"; now the dataset equals the bag's without them."""
    spec = SyntheticBagSpec(duration_s=1.0, height=24, width=32, jitter_s=0.002)
    bag = make_bag("bag", duration_s=1.0, jitter_s=0.002)
    twice = _rewrite(bag, tmp_path / "twice", lambda topic, msgtype, stamp, raw: [(msgtype, stamp, raw)] * 2)
    contract = contract_for(spec, camera_dtype="image")
    once = convert([bag], contract, tmp_path / "once")
    doubled = convert([twice], contract, tmp_path / "doubled")
    (a,), (b,) = once.episodes, doubled.episodes
    assert b["frames"] == a["frames"] and b["start_stamp_s"] == a["start_stamp_s"]
    for key in contract.features:
        np.testing.assert_array_equal(_positions(tmp_path / "doubled", key), _positions(tmp_path / "once", key))
    for key, feature in b["features"].items():
        assert feature["reused"] == a["features"][key]["reused"], key
        assert feature["duplicates"] == feature["samples"] == a["features"][key]["samples"], key
    assert set(doubled.bags[0]["equal_stamps"]) == set(contract.topics)
    assert any("exact duplicate message(s)" in w for w in doubled.bags[0]["warnings"])


def _damage_images(topic: str, msgtype: str, stamp: int, raw: bytes, counts: dict[str, int]) -> list[Any]:
    """Camera images 2 and 4 of the compressed front camera become garbage and a 20000x20000 PNG header; images 3
    and 5 of the raw wrist camera become 0x0 and an rgb8 image whose step says mono."""
    if "/cameras/" not in topic:
        return [(msgtype, stamp, raw)]
    index = counts[topic] = counts.get(topic, -1) + 1
    msg = STORE.deserialize_cdr(raw, msgtype)
    if msgtype == "sensor_msgs/msg/CompressedImage" and index in (2, 4):
        data = b"\xff\xd8 garbage, no frame header" if index == 2 else png_declaring(20000, 20000)
        msg = T[msgtype](header=msg.header, format=msg.format, data=np.frombuffer(data, np.uint8))
    elif msgtype == "sensor_msgs/msg/Image" and index in (3, 5):
        rows, cols, step = (0, 0, 0) if index == 3 else (msg.height, msg.width, msg.width)
        msg = T[msgtype](
            header=msg.header,
            height=rows,
            width=cols,
            encoding="rgb8",
            is_bigendian=0,
            step=step,
            data=np.asarray(msg.data)[: rows * step],
        )
    return [(msgtype, stamp, bytes(STORE.serialize_cdr(msg, msgtype)))]


def test_damaged_images_are_dropped_one_by_one(make_bag: MakeBag, tmp_path: Path) -> None:
    """One garbage JPEG, a 0x0 image or an rgb8 image whose step says mono used to refuse the whole bag, a 20000x20000
    PNG to be decoded (74 s, 2.47 GB) before that; each is now dropped on its own, counted with its reason (without
    decoding it), and the frame holds the camera's previous image."""
    spec = SyntheticBagSpec(duration_s=0.5, height=24, width=32, compressed=("front",))
    bag = make_bag("bag", duration_s=0.5, compressed=("front",))
    counts: dict[str, int] = {}
    damaged = _rewrite(bag, tmp_path / "damaged", lambda *m: _damage_images(*m, counts))
    contract = contract_for(spec, camera_dtype="image")
    clean = convert([bag], contract, tmp_path / "clean")
    result = convert([damaged], contract, tmp_path / "ds")
    assert not result.failed, result.failed
    assert result.frames == clean.frames
    front, wrist = (f.topic for f in contract.features.values() if f.is_image)
    assert result.bags[0]["refused_messages"] == {
        front: {
            "compressed image is not a JPEG or PNG, or its header is damaged": 1,
            "compressed image is 20000x20000, the contract declares shape [24, 32, 3]": 1,
        },
        wrist: {
            "image is 0x0, the contract declares shape [24, 32, 3]": 1,
            "image step 32 is shorter than a row of 32 rgb8 pixels (96 bytes)": 1,
        },
    }
    for key in ("observation.images.front", "observation.images.wrist"):
        ours, theirs = _positions(tmp_path / "ds", key), _positions(tmp_path / "clean", key)
        held = [i for i in range(len(ours)) if not np.array_equal(ours[i], theirs[i])]
        assert len(held) == 2, (key, held)  # the frames that showed a damaged image show the one before it
        for i in held:
            np.testing.assert_array_equal(ours[i], theirs[i - 1])


def test_a_bag_with_no_usable_image_is_refused_in_one_line(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.3, height=24, width=32, cameras=("front",))
    bag = make_bag("bag", duration_s=0.3, cameras=("front",))

    def zero(topic: str, msgtype: str, stamp: int, raw: bytes) -> list[Any]:
        if msgtype != "sensor_msgs/msg/Image":
            return [(msgtype, stamp, raw)]
        msg = STORE.deserialize_cdr(raw, msgtype)
        empty = T[msgtype](
            header=msg.header, height=0, width=0, encoding="rgb8", is_bigendian=0, step=0, data=np.zeros(0, np.uint8)
        )
        return [(msgtype, stamp, bytes(STORE.serialize_cdr(empty, msgtype)))]

    result = convert(
        [_rewrite(bag, tmp_path / "zero", zero)], contract_for(spec, camera_dtype="image"), tmp_path / "ds"
    )
    (failed,) = result.failed
    assert "\n" not in failed["error"]
    assert (
        "no usable /cameras/front/image_raw message for observation.images.front: all 10 were refused"
        in failed["error"]
    )
    assert "image is 0x0, the contract declares shape [24, 32, 3]" in failed["error"]
    assert not result.episodes and not (tmp_path / "ds").exists()
