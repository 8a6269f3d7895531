"""Message <-> dict/YAML conversion on real rosidl-generated classes (no ROS graph)."""

from __future__ import annotations

import array

import numpy as np
import pytest
import yaml
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import ByteMultiArray, Header, String

from lerobot_msgs.msg import ActionChunk, RecorderStatus
from lerobot_ros.message_conversion import (
    FieldValueError,
    MessageConversionError,
    MessageTypeError,
    UnknownFieldError,
    fill_message,
    get_field,
    import_message_type,
    message_from_dict,
    message_from_yaml,
    message_to_csv,
    message_to_dict,
    message_to_yaml,
    message_type_name,
    parse_type_name,
)

NOW_NS = 1_700_000_123_250_000_000


def fixed_now() -> int:
    return NOW_NS


def make_joint_state() -> JointState:
    msg = JointState()
    msg.header.stamp.sec = 12
    msg.header.stamp.nanosec = 345
    msg.header.frame_id = "base_link"
    msg.name = ["shoulder_pan", "gripper"]
    msg.position = [0.25, -1.5]
    msg.velocity = [0.0, 2.0]
    msg.effort = []
    return msg


def test_joint_state_round_trip_keeps_field_order_and_values() -> None:
    msg = make_joint_state()
    plain = message_to_dict(msg)
    assert list(plain) == ["header", "name", "position", "velocity", "effort"]
    assert plain["header"] == {"stamp": {"sec": 12, "nanosec": 345}, "frame_id": "base_link"}
    assert plain["position"] == [0.25, -1.5]
    assert message_from_dict(JointState, plain) == msg


def test_joint_state_yaml_reads_like_ros2_topic_echo_and_parses_back() -> None:
    msg = make_joint_state()
    text = message_to_yaml(msg)
    expected_head = "header:\n  stamp:\n    sec: 12\n    nanosec: 345\n  frame_id: base_link\nname:\n- shoulder_pan\n"
    assert text.startswith(expected_head)
    assert "effort: []\n" in text
    assert message_from_yaml(JointState, text) == msg


def test_action_chunk_round_trip_with_duration_uint64_and_float32() -> None:
    chunk = ActionChunk()
    chunk.header.stamp = Time(sec=5, nanosec=1)
    chunk.names = ["a", "b"]
    chunk.horizon = 3
    chunk.period = Duration(sec=0, nanosec=33_333_333)
    chunk.data = [float(v) for v in range(6)]
    chunk.chunk_id = 2**64 - 1
    chunk.inference_time = 0.5
    chunk.policy = "act"
    plain = message_to_dict(chunk)
    assert plain["chunk_id"] == 2**64 - 1
    assert plain["period"] == {"sec": 0, "nanosec": 33_333_333}
    assert message_from_dict(ActionChunk, plain) == chunk
    assert message_from_yaml(ActionChunk, message_to_yaml(chunk)) == chunk


def test_numpy_arrays_fill_sequences_and_fixed_arrays() -> None:
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    chunk = message_from_dict(ActionChunk, {"names": ["a", "b"], "horizon": 3, "data": data})
    assert isinstance(chunk.data, array.array)
    assert chunk.data.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    info = message_from_dict(CameraInfo, {"k": np.eye(3), "d": np.array([0.1, 0.2])})
    assert isinstance(info.k, np.ndarray)
    assert info.k.tolist() == np.eye(3).reshape(-1).tolist()
    assert message_to_dict(info)["d"] == [0.1, 0.2]


def test_fixed_array_length_is_checked() -> None:
    with pytest.raises(FieldValueError, match=r"field 'k' of sensor_msgs/msg/CameraInfo: expected exactly 9 elements"):
        message_from_dict(CameraInfo, {"k": [1.0, 2.0]})


def test_uint8_data_from_bytes_and_numpy_and_back_to_ints() -> None:
    raw = bytes(range(256))
    image = message_from_dict(Image, {"height": 1, "width": 256, "encoding": "mono8", "data": raw})
    assert bytes(image.data) == raw
    from_numpy = message_from_dict(Image, {"data": np.frombuffer(raw, dtype=np.uint8).reshape(16, 16)})
    assert bytes(from_numpy.data) == raw
    assert message_to_dict(image)["data"] == list(range(256))
    with pytest.raises(FieldValueError, match=r"'data' of sensor_msgs/msg/Image: expected integers in \[0, 255\]"):
        message_from_dict(Image, {"data": np.array([0, 256])})


def test_byte_fields_become_ints() -> None:
    status = message_from_dict(DiagnosticStatus, {"level": 2, "name": "bus"})
    assert status.level == DiagnosticStatus.ERROR
    assert message_to_dict(status)["level"] == 2
    packed = message_from_dict(ByteMultiArray, {"data": b"\x01\xff"})
    assert message_to_dict(packed)["data"] == [1, 255]
    listed = message_from_dict(ByteMultiArray, {"data": [1, 255]})
    assert message_to_dict(listed)["data"] == [1, 255]


def test_nested_message_sequences() -> None:
    values = {"status": [{"level": 1, "name": "arm", "values": [{"key": "temperature", "value": "41"}]}]}
    msg = message_from_dict(DiagnosticArray, values)
    assert msg.status[0].values[0].key == "temperature"
    assert message_to_dict(msg)["status"][0]["values"] == [{"key": "temperature", "value": "41"}]


def test_time_and_duration_accept_seconds_now_and_auto() -> None:
    chunk = message_from_dict(ActionChunk, {"header": {"stamp": 1.25}, "period": -0.5}, now_ns=fixed_now)
    assert (chunk.header.stamp.sec, chunk.header.stamp.nanosec) == (1, 250_000_000)
    assert (chunk.period.sec, chunk.period.nanosec) == (-1, 500_000_000)
    stamped = message_from_dict(JointState, {"header": {"stamp": "now"}}, now_ns=fixed_now)
    assert (stamped.header.stamp.sec, stamped.header.stamp.nanosec) == (1_700_000_123, 250_000_000)
    auto = message_from_dict(JointState, {"header": "auto"}, now_ns=fixed_now)
    assert auto.header.stamp == stamped.header.stamp
    with pytest.raises(FieldValueError, match=r"field 'header.stamp' .* expected a number of seconds, 'now'"):
        message_from_dict(JointState, {"header": {"stamp": "yesterday"}})
    with pytest.raises(FieldValueError, match=r"field 'period' .* expected a number of seconds"):
        message_from_dict(ActionChunk, {"period": "now"})


def test_fields_not_given_keep_their_values() -> None:
    msg = make_joint_state()
    fill_message(msg, {"header": {"frame_id": "world"}, "position": [1.0, 2.0]})
    assert msg.header.frame_id == "world"
    assert msg.header.stamp.sec == 12
    assert list(msg.name) == ["shoulder_pan", "gripper"]


def test_unknown_field_error_lists_the_fields() -> None:
    with pytest.raises(UnknownFieldError) as err:
        message_from_dict(JointState, {"positon": [1.0]})
    assert str(err.value).startswith(
        "unknown field 'positon' in sensor_msgs/msg/JointState; fields are: header, name, position, velocity, effort"
    )
    assert "did you mean 'position'" in str(err.value)


def test_unknown_nested_field_names_its_path() -> None:
    with pytest.raises(UnknownFieldError, match=r"'header.stmp' in sensor_msgs/msg/JointState; fields of 'header'"):
        message_from_dict(JointState, {"header": {"stmp": 1}})


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        ({"position": [1.0, "a"]}, r"'position\[1\]' of sensor_msgs/msg/JointState: expected a number \(double\)"),
        ({"name": "shoulder"}, r"'name' .* expected a list \(string\[\]\), got str 'shoulder'"),
        ({"header": {"stamp": {"sec": 2**31}}}, r"'header.stamp.sec' .* expected an integer in \[-2147483648"),
        ({"header": 5}, r"'header' .* expected a mapping of field names"),
        ({"header": {"frame_id": True}}, r"'header.frame_id' .* expected a string \(quote it"),
    ],
)
def test_value_errors_name_the_field(values: dict[str, object], pattern: str) -> None:
    with pytest.raises(FieldValueError, match=pattern):
        message_from_dict(JointState, values)


def test_integer_fields_reject_fractions_and_out_of_range() -> None:
    with pytest.raises(FieldValueError, match=r"'state' of lerobot_msgs/msg/RecorderStatus: expected an integer"):
        message_from_dict(RecorderStatus, {"state": 1.5})
    with pytest.raises(FieldValueError, match=r"'frames' .* \(uint32\), got int -1"):
        message_from_dict(RecorderStatus, {"frames": -1})
    assert message_from_dict(RecorderStatus, {"frames": 3.0}).frames == 3


def test_string_fields_accept_yaml_numbers() -> None:
    assert message_from_yaml(String, "{data: 42}").data == "42"


def test_malformed_yaml_and_non_mapping() -> None:
    with pytest.raises(MessageConversionError, match=r"malformed YAML at line 1"):
        message_from_yaml(String, "{data: [")
    with pytest.raises(MessageConversionError, match=r"expected a YAML mapping .* got a list of 2 elements"):
        message_from_yaml(String, "[1, 2]")
    assert message_from_yaml(String, "") == String()


def test_truncation_and_placeholders_like_ros2() -> None:
    msg = message_from_dict(JointState, {"name": ["x" * 10], "position": list(range(5))})
    plain = message_to_dict(msg, truncate_length=3)
    assert plain["position"] == [0.0, 1.0, 2.0, "..."]
    assert plain["name"] == ["xxx..."]
    no_arr = message_to_dict(msg, no_arr=True)
    assert no_arr["position"] == "<sequence type: double, length: 5>"
    assert message_to_dict(CameraInfo(), no_arr=True)["k"] == "<array type: double[9]>"
    assert message_to_dict(Header(frame_id="base"), no_str=True)["frame_id"] == "<string length: 4>"
    assert yaml.safe_load(message_to_yaml(msg, truncate_length=3))["position"][-1] == "..."


def test_csv_flattens_in_field_order() -> None:
    assert message_to_csv(make_joint_state()) == "12,345,base_link,shoulder_pan,gripper,0.25,-1.5,0.0,2.0"


def test_get_field_walks_messages_dicts_and_indices() -> None:
    msg = make_joint_state()
    assert get_field(msg, "header.frame_id") == "base_link"
    assert get_field(msg, "position.1") == -1.5
    assert get_field(message_to_dict(msg), "header.stamp.sec") == 12
    with pytest.raises(UnknownFieldError, match=r"no field 'fram_id' of 'header'; fields are: stamp, frame_id"):
        get_field(msg, "header.fram_id")
    with pytest.raises(UnknownFieldError, match=r"'position' is an array of 2 elements"):
        get_field(msg, "position.7")


def test_type_names_resolve_both_spellings() -> None:
    assert import_message_type("sensor_msgs/msg/JointState") is JointState
    assert import_message_type("lerobot_msgs/ActionChunk") is ActionChunk
    assert message_type_name(ActionChunk) == "lerobot_msgs/msg/ActionChunk"
    assert message_type_name(JointState()) == "sensor_msgs/msg/JointState"
    assert parse_type_name("std_msgs/String") == ("std_msgs", "msg", "String")


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("String", r"invalid message type 'String': expected 'package/msg/Type'"),
        ("no_such_msgs/msg/Thing", r"no Python module 'no_such_msgs.msg'; install or build"),
        ("std_msgs/msg/Strng", r"std_msgs.msg has no message 'Strng' \(did you mean std_msgs/msg/String\?\)"),
    ],
)
def test_type_name_errors(name: str, pattern: str) -> None:
    with pytest.raises(MessageTypeError, match=pattern):
        import_message_type(name)


INTERFACE_PACKAGES = [
    "builtin_interfaces",
    "std_msgs",
    "geometry_msgs",
    "sensor_msgs",
    "trajectory_msgs",
    "diagnostic_msgs",
    "lerobot_msgs",
]


def _all_message_classes() -> list[type]:
    import importlib

    classes = []
    for package in INTERFACE_PACKAGES:
        module = importlib.import_module(f"{package}.msg")
        classes += [obj for name, obj in sorted(vars(module).items()) if name[0].isupper() and isinstance(obj, type)]
    return classes


@pytest.mark.parametrize("cls", _all_message_classes(), ids=message_type_name)
def test_every_installed_message_round_trips_through_dict_and_yaml(cls: type) -> None:
    default = cls()
    assert message_from_dict(cls, message_to_dict(default)) == default
    assert message_from_yaml(cls, message_to_yaml(default)) == default


def _sample_value(slot_type: object) -> object:
    """A non-default value for any rosidl type, exactly representable in every numeric type."""
    from rosidl_parser import definition as idl

    if isinstance(slot_type, idl.NamespacedType):
        return _sample_dict(import_message_type("/".join([*slot_type.namespaces, slot_type.name])))
    if isinstance(slot_type, idl.AbstractNestedType):
        size = slot_type.size if isinstance(slot_type, idl.Array) else min(2, getattr(slot_type, "maximum_size", 2))
        return [_sample_value(slot_type.value_type) for _ in range(size)]
    if isinstance(slot_type, idl.AbstractGenericString):
        return "ab"[: getattr(slot_type, "maximum_size", 2)]
    typename = slot_type.typename
    if typename == "boolean":
        return True
    if typename in ("float", "double"):
        return 1.5
    if typename == "char":
        return "c"
    return 3


def _sample_dict(cls: type) -> dict[str, object]:
    from lerobot_ros.message_conversion import message_fields

    return {field.name: _sample_value(field.type) for field in message_fields(cls)}


@pytest.mark.parametrize("cls", _all_message_classes(), ids=message_type_name)
def test_every_installed_message_keeps_non_default_values(cls: type) -> None:
    sample = _sample_dict(cls)
    msg = message_from_dict(cls, sample)
    assert message_to_dict(msg) == sample
    assert message_from_yaml(cls, message_to_yaml(msg)) == msg
