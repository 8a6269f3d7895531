"""Synthetic bags -> datasets: values follow the hold rule, the reader and validator accept the result,
parallel equals serial, append, splitting, and bad input gives a clear error or a reported skip."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from bag_helpers import convert
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from lerobot_bags.errors import BagError
from lerobot_bags.pipeline import DEFAULT_CODEC, report_path_for
from lerobot_bags.synthetic import SyntheticBagSpec, camera_pixels, contract_for
from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_dataset import DatasetReader
from lerobot_dataset.layout import STAGING_DIR
from lerobot_dataset.validate import validate

MakeBag = Callable[..., Path]


def _stamps_and_values(bag: Path, topic: str) -> tuple[list[int], list[Any]]:
    """Header stamps and messages of a topic, read independently with rosbags' AnyReader."""
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    stamps, msgs = [], []
    with AnyReader([bag], default_typestore=typestore) as reader:
        conns = [c for c in reader.connections if c.topic == topic]
        for conn, _, raw in reader.messages(connections=conns):
            msg = reader.deserialize(raw, conn.msgtype)
            stamps.append(msg.header.stamp.sec * NS + msg.header.stamp.nanosec)
            msgs.append(msg)
    return stamps, msgs


def _hold_index(stamps: list[int], t: int) -> int:
    return int(np.searchsorted(np.asarray(stamps), t, side="right")) - 1


def _frame_times(reader: DatasetReader, episode: int, t0: int, fps: int) -> list[int]:
    first, last = reader.episode_range(episode)
    return [t0 + (2 * int(reader[i]["frame_index"]) * NS + fps) // (2 * fps) for i in range(first, last)]


def test_images_and_joints_follow_the_hold_rule_and_validate(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=1.0, height=24, width=32, jitter_s=0.004)
    bag = make_bag("bag", jitter_s=0.004)
    contract = contract_for(spec, camera_dtype="image")
    root = tmp_path / "ds"
    result = convert([bag], contract, root)
    assert not result.failed and len(result.episodes) == 1
    assert validate(root) == []
    episode = result.episodes[0]
    t0 = round(episode["start_stamp_s"] * NS)
    state_stamps, state_msgs = _stamps_and_values(bag, "/follower/joint_states")
    cam_stamps, _ = _stamps_and_values(bag, "/cameras/front/image_raw")
    wrist_stamps, _ = _stamps_and_values(bag, "/cameras/wrist/image_raw")
    first = max(state_stamps[0], cam_stamps[0], wrist_stamps[0])
    # Frame 0: every feature has data; the grid sits just after the cameras' stamps (less than a period later).
    assert first <= t0 < first + NS // contract.fps
    units = contract.features["observation.state"].joint_units()
    with DatasetReader(root) as reader:
        assert len(reader) == episode["frames"] > 25
        for row, t in enumerate(_frame_times(reader, 0, t0, contract.fps)):
            item = reader[row]
            j = _hold_index(state_stamps, t)
            assert state_stamps[j] <= t
            expected = units.apply(np.asarray(state_msgs[j].position))
            np.testing.assert_allclose(item["observation.state"], expected, rtol=1e-5, atol=1e-4)
            k = _hold_index(cam_stamps, t)
            np.testing.assert_array_equal(item["observation.images.front"], camera_pixels(k, 0, 24, 32))
            w = _hold_index(wrist_stamps, t)
            np.testing.assert_array_equal(item["observation.images.wrist"], camera_pixels(w, 1, 24, 32))
            assert item["task"] == "pick the cube"
    report = json.loads(report_path_for(root).read_text())
    assert report["runs"][0]["episodes"][0]["coverage"] == 1.0
    assert set(report["runs"][0]["episodes"][0]["features"]) == set(contract.features)


@pytest.mark.parametrize("encoding", ["bgr8", "mono8"])
def test_bgr8_and_mono8_become_rgb(make_bag: MakeBag, tmp_path: Path, encoding: str) -> None:
    spec = SyntheticBagSpec(duration_s=0.3, height=24, width=32, encoding=encoding, cameras=("front",))
    bag = make_bag("bag", duration_s=0.3, encoding=encoding, cameras=("front",))
    root = tmp_path / "ds"
    convert([bag], contract_for(spec, camera_dtype="image"), root)
    with DatasetReader(root) as reader:
        picture = reader[0]["observation.images.front"]
    expected = camera_pixels(0, 0, 24, 32)
    if encoding == "mono8":
        expected = np.repeat(expected[:, :, :1], 3, axis=2)
    np.testing.assert_array_equal(picture, expected)


def test_video_and_compressed_cameras(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.5, height=48, width=64, compressed=("wrist",))
    bag = make_bag("bag", duration_s=0.5, height=48, width=64, compressed=("wrist",))
    root = tmp_path / "ds"
    result = convert([bag], contract_for(spec, camera_dtype="video"), root)
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.features["observation.images.front"].dtype == "video"
        frame = reader[3]
        for key, cam in (("observation.images.front", 0), ("observation.images.wrist", 1)):
            diff = np.abs(frame[key].astype(int) - camera_pixels(3, cam, 48, 64).astype(int))
            assert diff.mean() < 12, key  # lossy (JPEG + h264), but the same picture
    assert result.frames == 15


def test_depth_is_rejected_for_video_and_stored_when_declared(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.2, height=6, width=8, encoding="16UC1", cameras=("depth",))
    bag = make_bag("bag", duration_s=0.2, height=6, width=8, encoding="16UC1", cameras=("depth",))
    result = convert([bag], contract_for(spec, camera_dtype="video"), tmp_path / "video")
    assert result.failed and "16UC1 is a depth encoding" in result.failed[0]["error"]
    assert "dtype: depth" in result.failed[0]["error"]
    assert not (tmp_path / "video").exists()  # nothing half-written
    convert([bag], contract_for(spec, camera_dtype="depth"), tmp_path / "depth")
    with DatasetReader(tmp_path / "depth") as reader:
        depth = reader[0]["observation.images.depth"]
    expected = camera_pixels(0, 0, 6, 8)[:, :, 0].astype(np.float32) * 10 * 0.001
    np.testing.assert_allclose(depth.reshape(6, 8), expected, rtol=1e-6)


def _data_rows(root: Path) -> dict[str, list[Any]]:
    tables = [pq.read_table(p) for p in sorted((root / "data").glob("*/*.parquet"))]
    rows: dict[str, list[Any]] = {}
    for table in tables:
        for key, values in table.to_pydict().items():
            rows.setdefault(key, []).extend(values)
    return rows


def test_parallel_conversion_equals_serial(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.5, height=24, width=32)
    bags = [make_bag(f"bag{i}", duration_s=0.5, seed=i, storage="sqlite3" if i % 2 else "mcap") for i in range(3)]
    contract = contract_for(spec, camera_dtype="image")
    serial = convert(bags, contract, tmp_path / "serial", jobs=1)
    parallel = convert(bags, contract, tmp_path / "parallel", jobs=2)
    assert [e["bag"] for e in parallel.episodes] == [str(b) for b in bags]
    assert [e["frames"] for e in parallel.episodes] == [e["frames"] for e in serial.episodes]
    assert _data_rows(tmp_path / "serial") == _data_rows(tmp_path / "parallel")
    assert validate(tmp_path / "parallel") == []


def test_parallel_video_conversion_equals_serial(make_bag: MakeBag, tmp_path: Path) -> None:
    """Workers encode whole episodes in their own processes; the parent commits them in bag order."""
    spec = SyntheticBagSpec(duration_s=0.6, height=48, width=64, noise=3.0)
    bags = [make_bag(f"bag{i}", duration_s=0.6, height=48, width=64, noise=3.0, seed=i) for i in range(3)]
    contract = contract_for(spec, camera_dtype="video")
    roots = {jobs: tmp_path / f"jobs{jobs}" for jobs in (1, 2)}
    results = {jobs: convert(bags, contract, root, jobs=jobs, codec=DEFAULT_CODEC) for jobs, root in roots.items()}
    assert [e["bag"] for e in results[2].episodes] == [str(b) for b in bags]
    assert [e["frames"] for e in results[2].episodes] == [e["frames"] for e in results[1].episodes]
    assert all("worker_cpu_s" in bag for bag in results[2].bags)
    assert _data_rows(roots[1]) == _data_rows(roots[2])
    for name in ("meta/stats.json", "meta/info.json", "meta/tasks.parquet"):
        assert (roots[1] / name).read_bytes() == (roots[2] / name).read_bytes(), name
    assert pq.read_table(roots[1] / "meta/episodes").equals(pq.read_table(roots[2] / "meta/episodes"))
    with DatasetReader(roots[1]) as serial, DatasetReader(roots[2]) as parallel:
        assert len(serial) == len(parallel) == results[1].frames
        for i in range(len(serial)):
            for key in ("observation.images.front", "observation.images.wrist"):
                np.testing.assert_array_equal(serial[i][key], parallel[i][key], err_msg=f"{key} frame {i}")
    assert validate(roots[2]) == []
    assert not list((roots[2] / STAGING_DIR).glob("worker-*"))  # the workers' staging folders are gone


def test_append_adds_episodes_and_refuses_another_schema(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.3, height=24, width=32)
    contract = contract_for(spec, camera_dtype="image")
    root = tmp_path / "ds"
    convert([make_bag("a", duration_s=0.3)], contract, root)
    with pytest.raises(BagError, match="--append"):
        convert([make_bag("b", duration_s=0.3, seed=1)], contract, root)
    second = convert([tmp_path / "b"], contract, root, append=True, task="place the cube")
    assert [e["episode_index"] for e in second.episodes] == [1]
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 2 and reader.tasks == ["pick the cube", "place the cube"]
    assert validate(root) == []
    other = contract_for(SyntheticBagSpec(duration_s=0.3, height=24, width=32, cameras=("front",)))
    before = (root / "meta" / "info.json").read_text()
    with pytest.raises(BagError, match="different schema"):
        convert([tmp_path / "b"], other, root, append=True)
    assert (root / "meta" / "info.json").read_text() == before
    assert len(json.loads(report_path_for(root).read_text())["runs"]) == 2


def test_split_by_marker_gap_and_task_topic(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=1.0, height=24, width=32, cameras=("front",))
    tasks = ((0.0, "reach"), (0.5, "grasp"))
    bag = make_bag("bag", duration_s=1.0, cameras=("front",), task_topic="/task", tasks=tasks)
    contract = contract_for(spec, camera_dtype="image")
    by_marker = convert([bag], contract, tmp_path / "marker", task=None, split="marker:/task")
    assert [e["task"] for e in by_marker.episodes] == ["reach", "grasp"]
    assert all(12 <= e["frames"] <= 16 for e in by_marker.episodes)
    by_topic = convert([bag], contract, tmp_path / "topic", task=None, task_topic="/task")
    assert [e["task"] for e in by_topic.episodes] == ["reach"]
    # Two recordings with a pause: the gap split finds them again.
    first = make_bag("first", duration_s=0.4, cameras=("front",))
    second = make_bag("second", duration_s=0.4, cameras=("front",), start_ns=1_700_000_005 * NS, seed=3)
    merged = _merge_bags([first, second], tmp_path / "merged")
    by_gap = convert([merged], contract, tmp_path / "gap", split="gap:1.0")
    assert len(by_gap.episodes) == 2 and all(11 <= e["frames"] <= 13 for e in by_gap.episodes)


def _merge_bags(bags: list[Path], out: Path) -> Path:
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    with Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns: dict[str, Any] = {}
        for bag in bags:
            with AnyReader([bag], default_typestore=typestore) as reader:
                for conn, stamp, raw in reader.messages():
                    if conn.topic not in conns:
                        conns[conn.topic] = writer.add_connection(conn.topic, conn.msgtype, typestore=typestore)
                    writer.write(conns[conn.topic], stamp, raw)
    return out


def test_linear_interpolates_vectors_between_bracketing_samples(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.5, height=24, width=32, cameras=("front",), commands=False)
    bag = make_bag("bag", duration_s=0.5, cameras=("front",), commands=False)
    contract = contract_for(spec, camera_dtype="image", max_age_s=None)
    hold = convert([bag], contract, tmp_path / "hold")
    linear = convert([bag], contract, tmp_path / "linear", align="linear")
    assert hold.frames == linear.frames
    stamps, msgs = _stamps_and_values(bag, "/follower/joint_states")
    units = contract.features["observation.state"].joint_units()
    t0 = round(linear.episodes[0]["start_stamp_s"] * NS)
    with DatasetReader(tmp_path / "linear") as reader:
        for row, t in enumerate(_frame_times(reader, 0, t0, contract.fps)[:-1]):
            j = _hold_index(stamps, t)
            a, b = np.asarray(msgs[j].position), np.asarray(msgs[j + 1].position)
            alpha = (t - stamps[j]) / (stamps[j + 1] - stamps[j])
            expected = units.apply(a + alpha * (b - a))
            np.testing.assert_allclose(reader[row]["observation.state"], expected, rtol=1e-4, atol=1e-3)


def test_missing_topic_wrong_type_bad_field_fail_before_writing(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.2, height=24, width=32)
    good = make_bag("good", duration_s=0.2)
    no_commands = make_bag("nocmd", duration_s=0.2, commands=False)
    contract = contract_for(spec)
    root = tmp_path / "ds"
    with pytest.raises(BagError, match=r"has no topic /follower/joint_commands"):
        convert([good, no_commands], contract, root)
    assert not root.exists()
    wrong_type = _with_feature(contract, "action", type="std_msgs/msg/Float64MultiArray", field="data", joints=None)
    with pytest.raises(BagError, match=r"carries sensor_msgs/msg/JointState, the contract expects std_msgs"):
        convert([good], wrong_type, root)
    bad_field = _with_feature(contract, "action", field="positions")
    with pytest.raises(BagError, match=r"has no field 'positions'.*fix `field`"):
        convert([good], bad_field, root)
    not_numeric = _with_feature(contract, "action", field="header.frame_id", joints=None, names=["f"])
    with pytest.raises(BagError, match=r"is not numeric \(string\)"):
        convert([good], not_numeric, root)
    not_an_array = _with_feature(contract, "action", field=["position.0", "header.0"], joints=None, names=["a", "b"])
    with pytest.raises(BagError, match=r"'header.0' indexes \[0\] into a field that is not an array"):
        convert([good], not_an_array, root)
    missing_joint = _with_feature(contract, "action", joints=["shoulder_pan", "elbow", "a", "b", "c", "gripper"])
    result = convert([good], missing_joint, root)
    assert "joint(s) ['elbow', 'a', 'b', 'c'] not in /follower/joint_commands" in result.failed[0]["error"]
    assert not root.exists()
    # Numbers in a path index arrays; several paths concatenate: the first and last joint of the commands.
    picked = _with_feature(contract, "action", field=["position.0", "position.5"], joints=None, names=["a", "b"])
    assert not convert([good], contract, tmp_path / "full").failed
    assert not convert([good], picked, root).failed
    actions = np.stack([row["action"] for row in DatasetReader(root)])
    in_units = np.stack([row["action"] for row in DatasetReader(tmp_path / "full")])
    radians = contract.features["action"].joint_units().inverse(in_units.astype(np.float64))
    # Without joints the converter's default (rad_to_deg) applies to every value, the gripper included.
    np.testing.assert_allclose(actions, np.degrees(radians[:, [0, 5]]), rtol=1e-4, atol=1e-3)


def _with_feature(contract: Contract, key: str, **changes: Any) -> Contract:
    raw = json.loads(json.dumps(contract.to_dict()))
    for name, value in changes.items():
        if value is None:
            raw["features"][key].pop(name, None)
        else:
            raw["features"][key][name] = value
    return Contract.from_dict(raw, source="<test contract>")


def test_truncated_and_corrupt_bags_are_reported_without_half_written_episodes(
    make_bag: MakeBag, tmp_path: Path
) -> None:
    spec = SyntheticBagSpec(duration_s=0.3, height=24, width=32)
    contract = contract_for(spec)
    good = make_bag("good", duration_s=0.3)
    truncated = tmp_path / "truncated"
    shutil.copytree(good, truncated)
    mcap = next(truncated.glob("*.mcap"))
    with mcap.open("r+b") as handle:
        handle.truncate(mcap.stat().st_size // 2)
    with pytest.raises(BagError, match=r"truncated.*cannot be opened \(truncated or corrupt\?\)"):
        convert([good, truncated], contract, tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
    corrupt = tmp_path / "corrupt"
    shutil.copytree(good, corrupt)
    mcap = next(corrupt.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    data[len(data) // 3 : len(data) // 3 + 4000] = b"\xff" * 4000
    mcap.write_bytes(bytes(data))
    other = make_bag("other", duration_s=0.3, seed=1)
    for jobs in (1, 2):
        root = tmp_path / f"ds{jobs}"
        result = convert([good, corrupt, other], contract, root, jobs=jobs)
        assert [e["bag"] for e in result.episodes] == [str(good), str(other)]
        assert [f["bag"] for f in result.failed] == [str(corrupt)]
        assert "truncated or corrupt" in result.failed[0]["error"]
        assert validate(root) == []
        with DatasetReader(root) as reader:
            assert reader.num_episodes == 2


def _write_joint_bag(path: Path, stamps_ms: list[int], topic: str = "/follower/joint_states") -> Path:
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    types = typestore.types
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection(topic, "sensor_msgs/msg/JointState", typestore=typestore)
        for i, ms in enumerate(stamps_ms):
            stamp = 1_700_000_000 * NS + ms * 1_000_000
            header = types["std_msgs/msg/Header"](
                stamp=types["builtin_interfaces/msg/Time"](sec=stamp // NS, nanosec=stamp % NS), frame_id=""
            )
            msg = types["sensor_msgs/msg/JointState"](
                header=header, name=["a"], position=np.array([float(i)]), velocity=np.zeros(0), effort=np.zeros(0)
            )
            writer.write(conn, 1_700_000_000 * NS + i * 10_000_000, typestore.serialize_cdr(msg, msg.__msgtype__))
    return path


def _joint_contract() -> Contract:
    return Contract.from_dict(
        {
            "robot_type": "one_joint",
            "fps": 10,
            "features": {
                "observation.state": {
                    "topic": "/follower/joint_states",
                    "type": "sensor_msgs/JointState",
                    "joints": ["a"],
                }
            },
        }
    )


def test_non_monotonic_stamps_and_empty_episodes(tmp_path: Path) -> None:
    backwards = _write_joint_bag(tmp_path / "backwards", [0, 100, 200, 150, 300])
    result = convert([backwards], _joint_contract(), tmp_path / "ds")
    assert "stamps are not monotonic" in result.failed[0]["error"]
    assert "--stamp receive" in result.failed[0]["error"]
    assert not (tmp_path / "ds").exists()
    receive = convert([backwards], _joint_contract(), tmp_path / "ds", stamp="receive")
    assert receive.frames == 1 and not receive.failed  # receive stamps 0..40 ms: one frame at 10 fps
    empty = _write_joint_bag(tmp_path / "empty", [])
    result = convert([empty], _joint_contract(), tmp_path / "ds2")
    assert result.skipped and "empty episode" in result.skipped[0]["skipped"]
    assert not (tmp_path / "ds2").exists()


def test_output_root_that_is_not_a_dataset(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.2, height=24, width=32)
    root = tmp_path / "ds"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    with pytest.raises(BagError, match="is not a LeRobot dataset"):
        convert([make_bag("bag", duration_s=0.2)], contract_for(spec), root)
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]


def test_marker_split_when_a_topic_stops_in_the_first_episode(tmp_path: Path) -> None:
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    types = typestore.types
    base = 1_700_000_000 * NS
    messages: list[tuple[int, str, Any]] = []
    for topic, end_ms in (("/a", 2000), ("/b", 800)):
        for ms in range(0, end_ms + 1, 10):
            stamp = base + ms * 1_000_000
            header = types["std_msgs/msg/Header"](
                stamp=types["builtin_interfaces/msg/Time"](sec=stamp // NS, nanosec=stamp % NS), frame_id=""
            )
            msg = types["sensor_msgs/msg/JointState"](
                header=header, name=["j"], position=np.array([ms / 1000]), velocity=np.zeros(0), effort=np.zeros(0)
            )
            messages.append((stamp, topic, msg))
    for ms, text in ((0, "first"), (1000, "second")):
        messages.append((base + ms * 1_000_000, "/m", types["std_msgs/msg/String"](data=text)))
    messages.sort(key=lambda m: m[0])
    bag = tmp_path / "bag"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns: dict[str, Any] = {}
        for stamp, topic, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=typestore)
            writer.write(conns[topic], stamp, typestore.serialize_cdr(msg, msg.__msgtype__))
    joint = {"type": "sensor_msgs/msg/JointState", "joints": ["j"]}
    contract = Contract.from_dict(
        {
            "robot_type": "two_topics",
            "fps": 10,
            "features": {"observation.a": {"topic": "/a", **joint}, "observation.b": {"topic": "/b", **joint}},
        }
    )
    result = convert([bag], contract, tmp_path / "ds", task=None, split="marker:/m")
    assert [e["task"] for e in result.episodes] == ["first"]
    assert result.episodes[0]["frames"] == 9  # 0.0 .. 0.8 s at 10 fps
    assert result.skipped and "no samples of observation.b" in result.skipped[0]["skipped"]
    with DatasetReader(tmp_path / "ds") as reader:
        np.testing.assert_allclose(reader[8]["observation.a"], [0.8], atol=1e-6)
