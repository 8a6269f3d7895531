"""bag record's storage side: topic selection and the splitting mcap writer (read back with rosbags)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from lerobot_recorder.recorder import RecorderError, TopicSelectionError
from lerobot_recorder.recorder.bag_writer import SplittingBagWriter, TopicSelection, topics_to_record

GRAPH = [
    ("/follower/joint_states", ["sensor_msgs/msg/JointState"]),
    ("/cameras/front/image_raw", ["sensor_msgs/msg/Image"]),
    ("/cameras/front/image_raw/compressed", ["sensor_msgs/msg/CompressedImage"]),
    ("/rosout", ["rcl_interfaces/msg/Log"]),
    ("/odd", ["a/msg/A", "b/msg/B"]),
]


def test_selection_by_name_regex_all_and_exclude() -> None:
    assert topics_to_record(TopicSelection(("/rosout",)), GRAPH) == {"/rosout": "rcl_interfaces/msg/Log"}
    chosen = topics_to_record(TopicSelection(regex="^/cameras/", exclude="compressed$"), GRAPH)
    assert chosen == {"/cameras/front/image_raw": "sensor_msgs/msg/Image"}
    everything = topics_to_record(TopicSelection(all_topics=True), GRAPH)
    assert "/rosout" not in everything and "/odd" not in everything and len(everything) == 3
    with pytest.raises(TopicSelectionError, match="no topics chosen"):
        TopicSelection()
    with pytest.raises(TopicSelectionError, match="not a valid regular expression"):
        TopicSelection(regex="([")
    with pytest.raises(TopicSelectionError, match="absolute"):
        TopicSelection(("chatter",))


def test_split_by_size_and_duration(tmp_path: Path) -> None:
    store = get_typestore(Stores.ROS2_KILTED)
    string = store.types["std_msgs/msg/String"]
    raw = bytes(store.serialize_cdr(string(data="x" * 100), "std_msgs/msg/String"))
    by_size = SplittingBagWriter(tmp_path / "size", store, max_bytes=1000)
    by_size.add_topic("/t", "std_msgs/msg/String")
    for i in range(25):
        by_size.write("/t", i * 1_000_000, raw)
    stats = by_size.close()
    assert len(stats.bags) == 3 and stats.messages == {"/t": 25}
    counts = []
    for bag in stats.bags:
        with Reader(bag) as reader:
            counts.append(sum(1 for _ in reader.messages()))
    assert counts == [10, 10, 5]

    by_time = SplittingBagWriter(tmp_path / "time", store, max_duration_ns=1_000_000_000)
    by_time.add_topic("/t", "std_msgs/msg/String")
    for i in range(30):
        by_time.write("/t", i * 100_000_000, raw)  # 3 s
    assert len(by_time.close().bags) == 3

    single = SplittingBagWriter(tmp_path / "one", store)
    single.add_topic("/t", "std_msgs/msg/String")
    single.write("/t", 0, raw)
    assert single.close().bags == [tmp_path / "one"]
    with pytest.raises(RecorderError, match="exists"):
        SplittingBagWriter(tmp_path / "one", store)


@pytest.mark.parametrize(("environ", "distro"), [({}, "kilted"), ({"ROS_DISTRO": "jazzy"}, "jazzy")])
def test_a_recorded_bag_names_the_ros_distro_of_its_writer(tmp_path: Path, monkeypatch, environ, distro) -> None:
    """rosbag2 writes its ROS_DISTRO in metadata.yaml and in the mcap's copy; rosbags alone writes 'rosbags'."""
    monkeypatch.delenv("ROS_DISTRO", raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    store = get_typestore(Stores.ROS2_KILTED)
    writer = SplittingBagWriter(tmp_path / "bag", store)
    writer.add_topic("/t", "std_msgs/msg/String")
    writer.write(
        "/t", 1, bytes(store.serialize_cdr(store.types["std_msgs/msg/String"](data="x"), "std_msgs/msg/String"))
    )
    (bag,) = writer.close().bags
    with Reader(bag) as reader:
        assert reader.ros_distro == distro
    metadata = (bag / "metadata.yaml").read_text()
    assert f"\n  ros_distro: {distro}\n" in metadata and "rosbags" not in metadata
    (mcap,) = bag.glob("*.mcap")
    assert f"ros_distro: {distro}".encode() in mcap.read_bytes() and b"ros_distro: rosbags" not in mcap.read_bytes()
