"""`lerobot_bags.cdr.deserialize_cdr` takes what the ROS middleware writes and refuses more.

rmw_serialize (rclpy's serialize_message, what raw publishers send) sizes a message by the type support's
estimate, which aligns empty sequences of 8-byte numbers and rounds fixed-size types to 4: bytes past the fields
that rosbags' own deserializer refuses ("CDR message size mismatch"). A typed publish sends the exact fields.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from rosbags.serde import SerdeError
from rosbags.typesys import Stores, get_typestore

from lerobot_bags.cdr import deserialize_cdr, rmw_serialized_size

serialization = pytest.importorskip("rclpy.serialization")
STORE = get_typestore(Stores.ROS2_KILTED)


def _messages() -> Iterator[tuple[str, Any]]:
    """Every message type the shipped contracts and the recorder's topics use, in many sizes."""
    from geometry_msgs.msg import Point32, Polygon, Pose, PoseArray
    from sensor_msgs.msg import CompressedImage, Image, JointState
    from std_msgs.msg import Bool, Float32MultiArray, Float64MultiArray, MultiArrayDimension, String
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    for n, frame_id, filled in itertools.product(range(4), ["", "a", "abc", "base", "camera_link"], range(3)):
        msg = JointState(name=[f"j{i}" * (i + 1) for i in range(n)], position=[0.1] * n)
        msg.header.frame_id = frame_id
        if filled >= 1:
            msg.velocity = [0.2] * n
        if filled >= 2:
            msg.effort = [0.3] * n
        yield "sensor_msgs/msg/JointState", msg
    for rows, cols, encoding, frame_id in itertools.product([0, 1, 2], [0, 1, 3], ["rgb8", "mono8"], ["", "cam"]):
        channels = 3 if encoding == "rgb8" else 1
        image = Image(height=rows, width=cols, encoding=encoding, step=cols * channels)
        image.data = bytes(rows * cols * channels)
        image.header.frame_id = frame_id
        yield "sensor_msgs/msg/Image", image
    for size, fmt in itertools.product(range(6), ["", "jpeg", "png"]):
        yield "sensor_msgs/msg/CompressedImage", CompressedImage(format=fmt, data=bytes(size))
    for n in range(3):
        yield "geometry_msgs/msg/PoseArray", PoseArray(poses=[Pose()] * n)
        yield "geometry_msgs/msg/Polygon", Polygon(points=[Point32()] * n)
    for n, dims in itertools.product(range(3), range(3)):
        array = Float64MultiArray(data=[1.0] * n)
        array.layout.dim = [MultiArrayDimension(label="x" * dims)] * dims
        yield "std_msgs/msg/Float64MultiArray", array
        yield "std_msgs/msg/Float32MultiArray", Float32MultiArray(data=[1.0] * n)
    for text in ["", "a", "ab", "abc"]:
        yield "std_msgs/msg/String", String(data=text)
    yield "std_msgs/msg/Bool", Bool()
    for points, joints in itertools.product(range(3), range(3)):
        trajectory = JointTrajectory(joint_names=["j"] * joints)
        trajectory.points = [JointTrajectoryPoint(positions=[0.0] * joints) for _ in range(points)]
        yield "trajectory_msgs/msg/JointTrajectory", trajectory


def test_what_rmw_serialize_writes_is_taken_and_its_length_predicted() -> None:
    longer: set[str] = set()
    for msgtype, msg in _messages():
        raw = bytes(serialization.serialize_message(msg))
        parsed = deserialize_cdr(STORE, raw, msgtype)
        exact = len(bytes(STORE.serialize_cdr(parsed, msgtype)))
        assert rmw_serialized_size(STORE, msgtype, parsed) == len(raw) or len(raw) - exact <= 3, (msgtype, msg)
        if len(raw) - exact > 3:
            longer.add(msgtype)
            with pytest.raises(SerdeError):
                STORE.deserialize_cdr(raw, msgtype)  # what bag2dataset and the recorder used (and refused)
        with pytest.raises(SerdeError, match="size mismatch"):
            deserialize_cdr(STORE, raw + bytes(8), msgtype)  # more than any serializer writes
    assert longer == {
        "sensor_msgs/msg/JointState",
        "std_msgs/msg/Float64MultiArray",
        "trajectory_msgs/msg/JointTrajectory",
    }
