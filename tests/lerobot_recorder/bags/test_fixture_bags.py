"""Every real fixture bag (../shared/fixtures/bags, see its README): the converter copes with its quirks."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from bag_helpers import convert
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from lerobot_bags.errors import BagError
from lerobot_bags.reader import BagSource
from lerobot_contract import Contract
from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate

EXPECTED_COUNTS = {
    "talker_foxy_sqlite3": {"/topic": 10, "/rosout": 10},
    "talker_zstd_file_sqlite3": {"/topic": 383, "/rosout": 392},
    "talker_zstd_message_sqlite3": {"/topic": 369, "/rosout": 758},
    "walker_humble_sqlite3": {"/joint_states": 598, "/imu": 3869, "/odom": 599},
    "cdr_test_custom_types_mcap": {"/array_topic": 4, "/test_topic": 3},
    "service_events_iron_mcap": {"/test_topic1": 1, "/test_topic2": 1},
}


def _walker_contract(field: str = "position", stamp: str = "header") -> Contract:
    return Contract.from_dict(
        {
            "robot_type": "turtlebot3_waffle",
            "fps": 10,
            "stamp": stamp,
            "features": {
                "observation.state": {
                    "topic": "/joint_states",
                    "type": "sensor_msgs/msg/JointState",
                    "field": field,
                    "joints": ["wheel_right_joint", "wheel_left_joint"],
                    "max_age_s": 0.2,
                },
                "observation.velocity": {
                    "topic": "/joint_states",
                    "type": "sensor_msgs/msg/JointState",
                    "field": "velocity",
                    "joints": ["wheel_right_joint", "wheel_left_joint"],
                },
            },
        },
        source="walker.yaml",
    )


@pytest.mark.parametrize("name", sorted(EXPECTED_COUNTS))
def test_every_fixture_bag_opens_and_reads_its_data_topics(fixture_bags: Path, name: str) -> None:
    with BagSource(fixture_bags / name) as bag:
        topics = [t for t in EXPECTED_COUNTS[name]]
        counts = dict.fromkeys(topics, 0)
        for topic, _, raw in bag.messages(topics):
            bag.deserialize(raw, bag.info.topics[topic].msgtype)
            counts[topic] += 1
        assert counts == EXPECTED_COUNTS[name]
        assert bag.count_warnings(topics) == []


def test_walker_joint_states_with_empty_effort_convert_on_sim_time(fixture_bags: Path, tmp_path: Path) -> None:
    bag = fixture_bags / "walker_humble_sqlite3"
    result = convert([bag], _walker_contract(), tmp_path / "header", task="drive")
    assert not result.failed and validate(tmp_path / "header") == []
    info = result.bags[0]
    assert any("/performance_metrics" in w and "no definition" in w for w in info["warnings"])
    clock = info["clock"]
    assert clock["stamp"] == "header" and "different clocks" in clock["note"]
    assert clock["receive_minus_header_s"]["/joint_states"] > 1e9  # wall clock (2023) vs sim time (~1400 s)
    episode = result.episodes[0]
    assert 1390 < episode["start_stamp_s"] < 1400  # sim time, from the header stamps
    header_frames = episode["frames"]
    receive = convert([bag], _walker_contract(stamp="receive"), tmp_path / "receive", task="drive", stamp="receive")
    assert receive.bags[0]["clock"]["stamp"] == "receive"
    assert receive.episodes[0]["start_stamp_s"] > 1.7e9  # wall clock
    assert receive.episodes[0]["frames"] > header_frames  # the sim ran slower than real time
    with DatasetReader(tmp_path / "header") as reader:
        first = reader[0]
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([bag], default_typestore=typestore) as any_reader:
        conns = [c for c in any_reader.connections if c.topic == "/joint_states"]
        msg = next(any_reader.deserialize(raw, c.msgtype) for c, _, raw in any_reader.messages(connections=conns))
    assert len(msg.effort) == 0
    by_name = dict(zip(msg.name, msg.position, strict=True))
    # Contract order (right, left), not message order; frame 0 holds the first real sample.
    np.testing.assert_allclose(
        first["observation.state"], [by_name["wheel_right_joint"], by_name["wheel_left_joint"]], rtol=1e-6
    )


def test_walker_effort_field_is_empty_and_fails_clearly(fixture_bags: Path, tmp_path: Path) -> None:
    result = convert([fixture_bags / "walker_humble_sqlite3"], _walker_contract("effort"), tmp_path / "ds", task="x")
    assert "field is empty" in result.failed[0]["error"] and not (tmp_path / "ds").exists()


def test_unknown_gazebo_type_is_skipped_but_refused_when_asked_for(fixture_bags: Path, tmp_path: Path) -> None:
    contract = Contract.from_dict(
        {
            "robot_type": "x",
            "fps": 10,
            "stamp": "receive",
            "features": {
                "observation.rtf": {
                    "topic": "/performance_metrics",
                    "type": "gazebo_msgs/msg/PerformanceMetrics",
                    "field": "real_time_factor",
                    "names": ["rtf"],
                }
            },
        }
    )
    with pytest.raises(BagError, match=r"/performance_metrics cannot be decoded: the bag has no definition"):
        convert([fixture_bags / "walker_humble_sqlite3"], contract, tmp_path / "ds", task="x")


def test_service_events_bag_does_not_abort(fixture_bags: Path, tmp_path: Path) -> None:
    bag_path = fixture_bags / "service_events_iron_mcap"
    with BagSource(bag_path) as bag:
        skipped = [w for w in bag.info.warnings if "_service_event" in w]
        assert len(skipped) == 2
        assert [bag.info.topics[t].readable for t in ("/test_topic1", "/test_topic2")] == [True, True]
    contract = Contract.from_dict(
        {
            "robot_type": "x",
            "fps": 10,
            "stamp": "receive",
            "features": {
                "observation.x": {
                    "topic": "/test_service1/_service_event",
                    "type": "test_msgs/srv/BasicTypes_Event",
                    "field": "info.sequence_number",
                    "names": ["n"],
                }
            },
        }
    )
    with pytest.raises(BagError, match="service-event topic"):
        convert([bag_path], contract, tmp_path / "ds", task="x")


def test_custom_types_from_embedded_definitions(fixture_bags: Path, tmp_path: Path) -> None:
    contract = Contract.from_dict(
        {
            "robot_type": "rosbag2_test",
            "fps": 30,
            "stamp": "receive",
            "features": {
                "observation.state": {
                    "topic": "/array_topic",
                    "type": "test_msgs/msg/Arrays",
                    "field": "int32_values",
                    "names": ["a", "b", "c"],
                },
                "observation.counter": {
                    "topic": "/test_topic",
                    "type": "test_msgs/msg/BasicTypes",
                    "field": "int32_value",
                    "names": ["n"],
                },
            },
        }
    )
    result = convert([fixture_bags / "cdr_test_custom_types_mcap"], contract, tmp_path / "ds", task="test")
    assert result.frames == 3 and validate(tmp_path / "ds") == []
    with DatasetReader(tmp_path / "ds") as reader:
        assert reader[0]["observation.counter"].tolist() == [123.0]


def _rosout_contract(fps: int) -> Contract:
    return Contract.from_dict(
        {
            "robot_type": "talker",
            "fps": fps,
            "stamp": "receive",
            "features": {
                "observation.level": {
                    "topic": "/rosout",
                    "type": "rcl_interfaces/msg/Log",
                    "field": "level",
                    "names": ["level"],
                }
            },
        }
    )


@pytest.mark.parametrize("name", ["talker_zstd_file_sqlite3", "talker_zstd_message_sqlite3"])
def test_zstd_bags_span_comes_from_message_stamps(fixture_bags: Path, tmp_path: Path, name: str) -> None:
    metadata = yaml.safe_load((fixture_bags / name / "metadata.yaml").read_text())
    meta_duration = metadata["rosbag2_bagfile_information"]["duration"]["nanoseconds"] / 1e9
    result = convert([fixture_bags / name], _rosout_contract(1), tmp_path / "ds", task="talk")
    frames = result.episodes[0]["frames"]
    assert meta_duration < 61 and frames > 150  # ~184-191 s of messages at 1 fps, not metadata's 60 s
    assert validate(tmp_path / "ds") == []


def test_headerless_topic_needs_receive_stamps(fixture_bags: Path, tmp_path: Path) -> None:
    contract = Contract.from_dict(
        {
            "robot_type": "talker",
            "fps": 1,
            "stamp": "header",
            "features": {
                "observation.level": {
                    "topic": "/rosout",
                    "type": "rcl_interfaces/msg/Log",
                    "field": "level",
                    "names": ["level"],
                }
            },
        }
    )
    with pytest.raises(BagError, match=r"has no header stamp; use --stamp receive"):
        convert([fixture_bags / "talker_foxy_sqlite3"], contract, tmp_path / "ds", task="x")
    with pytest.raises(BagError, match=r"field 'data' of std_msgs/msg/String is not numeric"):
        bad = Contract.from_dict(
            {
                "robot_type": "t",
                "fps": 1,
                "stamp": "receive",
                "features": {"x": {"topic": "/topic", "type": "std_msgs/msg/String", "field": "data", "names": ["d"]}},
            }
        )
        convert([fixture_bags / "talker_foxy_sqlite3"], bad, tmp_path / "ds", task="x")


def test_metadata_qos_mismatch_falls_back_to_the_storage_files(fixture_bags: Path, tmp_path: Path) -> None:
    bag = tmp_path / "talker"
    shutil.copytree(fixture_bags / "talker_foxy_sqlite3", bag)
    meta_path = bag / "metadata.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    for topic in meta["rosbag2_bagfile_information"]["topics_with_message_count"]:
        if topic["topic_metadata"]["name"] == "/rosout":
            topic["topic_metadata"]["offered_qos_profiles"] = (
                "- history: 3\n  depth: 0\n  reliability: 1\n  durability: 1\n  deadline:\n    sec: 9\n    nsec: 0\n"
                "  lifespan:\n    sec: 9\n    nsec: 0\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 9\n"
                "    nsec: 0\n  avoid_ros_namespace_conventions: false\n"
            )
    meta_path.write_text(yaml.safe_dump(meta))
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([bag], default_typestore=typestore) as reader:
        conns = [c for c in reader.connections if c.topic == "/rosout"]
        assert sum(1 for _ in reader.messages(connections=conns)) == 0  # the quirk: rosbags yields nothing
    with BagSource(bag) as source:
        assert source.info.direct_storage_read
        assert any("disagree" in w for w in source.info.warnings)
        assert sum(1 for _ in source.messages(["/rosout"])) == 10
    result = convert([bag], _rosout_contract(10), tmp_path / "ds", task="talk")
    assert result.frames > 0 and result.bags[0]["direct_storage_read"]
