"""Contract parsing, validation errors (file, key, problem), unit conversion and message -> feature values."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml

from lerobot_contract import Contract, ContractError, MessageMismatchError, NonFiniteValueError, load_contract
from lerobot_contract.images import decode_color, encode_image

REPO = Path(__file__).resolve().parents[2]
CONTRACTS = REPO / "config" / "contracts"
SO101_JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def _base() -> dict[str, Any]:
    return yaml.safe_load((CONTRACTS / "so101.yaml").read_text())


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", ["so101", "so100", "koch"])
def test_shipped_contracts_use_lerobot_names_and_units(name: str) -> None:
    contract = load_contract(CONTRACTS / f"{name}.yaml")
    state = contract.features["observation.state"]
    assert state.dataset_names == [f"{j}.pos" for j in SO101_JOINTS]
    assert contract.features["action"].dataset_names == state.dataset_names
    rad = np.array([0.0, math.pi / 2, -math.pi / 4, 0.1, 0.0, 0.0])
    msg = SimpleNamespace(name=list(reversed(SO101_JOINTS)), position=list(reversed(rad.tolist())))
    values = state.vector(msg)
    assert values.dtype == np.float32
    np.testing.assert_allclose(values[:5], np.degrees(rad[:5]), rtol=1e-6)
    gripper = contract.converters[state.units].converter_for("gripper", contract.converters)
    lo, hi = gripper.in_range
    open_msg = SimpleNamespace(name=SO101_JOINTS, position=[0, 0, 0, 0, 0, hi])
    closed_msg = SimpleNamespace(name=SO101_JOINTS, position=[0, 0, 0, 0, 0, lo])
    assert state.vector(open_msg)[5] == pytest.approx(100.0)
    assert state.vector(closed_msg)[5] == pytest.approx(0.0)
    cams = [k for k in contract.features if k.startswith("observation.images.")]
    assert cams and all(contract.features[k].shape == (480, 640, 3) for k in cams)


def test_units_round_trip_through_inverse() -> None:
    contract = load_contract(CONTRACTS / "so101.yaml")
    units = contract.features["action"].joint_units()
    rad = np.array([0.3, -1.2, 0.5, 1.0, -0.2, 0.9])
    np.testing.assert_allclose(units.inverse(units.apply(rad)), rad, atol=1e-12)


@pytest.mark.parametrize(
    ("mutate", "key", "problem"),
    [
        (lambda d: d.update(fps=0), "fps", "1..1000"),
        # The reliability fuzzer's finding: fps 30000000000 (and 30000) loaded; every consumer then sized its
        # frame grid by it (bag2dataset once wrote ~700 MB/min of spill at 1e9).
        (lambda d: d.update(fps=30_000_000_000), "fps", "1..1000"),
        (lambda d: d.update(fps=1001), "fps", "1..1000"),
        (lambda d: d.update(stamp="gps"), "stamp", "header"),
        (lambda d: d.pop("robot_type"), "robot_type", "missing"),
        (lambda d: d.update(colour="red"), "colour", "unknown key"),
        (lambda d: d["features"]["action"].update(topic="joint_commands"), "features.action.topic", "absolute"),
        (lambda d: d["features"]["action"].update(units="furlongs"), "features.action.units", "unknown converter"),
        (lambda d: d["features"]["action"]["names"].pop(), "features.action.names", "pair up"),
        (lambda d: d["features"]["action"].update(joints=["a", "a"]), "features.action.joints", "appears twice"),
        (lambda d: d["features"]["action"].update(typo=1), "features.action.typo", "unknown key"),
        (lambda d: d["features"]["action"].pop("type"), "features.action.type", "missing"),
        (lambda d: d["features"]["action"].update(max_age_s=-1), "features.action.max_age_s", "positive"),
        (
            lambda d: d["features"]["observation.images.front"].update(shape=[480, 640]),
            "features.observation.images.front.shape",
            "[height, width, 3]",
        ),
        (
            lambda d: d["features"]["observation.images.front"].update(dtype="float32"),
            "features.observation.images.front.dtype",
            "image features",
        ),
        (lambda d: d["units"]["so101_gripper_0_100"].update(kind="log"), "units.so101_gripper_0_100.kind", "kind"),
        (lambda d: d["units"]["so101_gripper_0_100"].update({"in": [1, 1]}), "units.so101_gripper_0_100.in", "two"),
        (lambda d: d["units"]["lerobot_so101"].update(default="nope"), "units.lerobot_so101.default", "unknown"),
        (lambda d: d["features"].update({"timestamp": d["features"]["action"]}), "features.timestamp", "bookkeeping"),
    ],
)
def test_invalid_contract_names_file_key_and_problem(tmp_path: Path, mutate: Any, key: str, problem: str) -> None:
    data = _base()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ContractError) as info:
        load_contract(path)
    err = info.value
    assert err.source == str(path)
    assert err.key == key
    assert problem in err.problem
    assert str(path) in str(err) and key in str(err)


def test_unreadable_and_non_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match="cannot read"):
        load_contract(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("features: [unclosed\n")
    with pytest.raises(ContractError, match="not valid YAML"):
        load_contract(bad)


def test_missing_joint_and_empty_field_are_clear_errors() -> None:
    contract = load_contract(CONTRACTS / "so101.yaml")
    state = contract.features["observation.state"]
    msg = SimpleNamespace(name=SO101_JOINTS[:5], position=[0.0] * 5)
    with pytest.raises(MessageMismatchError, match=r"joint\(s\) \['gripper'\] not in /follower/joint_states"):
        state.vector(msg)
    effort = Contract.from_dict(
        {
            "robot_type": "walker",
            "fps": 10,
            "features": {
                "observation.effort": {
                    "topic": "/joint_states",
                    "type": "sensor_msgs/JointState",
                    "field": "effort",
                    "joints": ["wheel_left_joint"],
                }
            },
        }
    ).features["observation.effort"]
    with pytest.raises(MessageMismatchError, match="empty"):
        effort.vector(SimpleNamespace(name=["wheel_left_joint"], effort=[]))
    with pytest.raises(MessageMismatchError, match="no field 'effort'"):
        effort.vector(SimpleNamespace(name=["wheel_left_joint"]))


def test_vector_without_joints_uses_field_length() -> None:
    contract = Contract.from_dict(
        {
            "robot_type": "pusht",
            "fps": 10,
            "units": {"half": {"kind": "scale", "factor": 0.5, "offset": 1.0}},
            "features": {
                "action": {
                    "topic": "/cmd",
                    "type": "std_msgs/msg/Float64MultiArray",
                    "field": "data",
                    "names": ["x", "y"],
                    "units": "half",
                    "dtype": "float64",
                }
            },
        }
    )
    action = contract.features["action"]
    np.testing.assert_allclose(action.vector(SimpleNamespace(data=[2.0, 4.0])), [2.0, 3.0])
    with pytest.raises(MessageMismatchError, match="has 3 values"):
        action.vector(SimpleNamespace(data=[1.0, 2.0, 3.0]))


def test_list_of_field_paths_with_array_indices() -> None:
    """The sim's environment_state: block and goal positions picked out of a PoseArray."""
    contract = load_contract(CONTRACTS / "so101_sim.yaml")
    env = contract.features["observation.environment_state"]
    assert env.field_paths[0] == "poses.0.position.x" and env.size == 6

    def pose(x: float, y: float, z: float) -> SimpleNamespace:
        return SimpleNamespace(position=SimpleNamespace(x=x, y=y, z=z))

    msg = SimpleNamespace(poses=[pose(0.1, 0.2, 0.03), pose(-0.1, 0.25, 0.0)])
    np.testing.assert_allclose(env.vector(msg), [0.1, 0.2, 0.03, -0.1, 0.25, 0.0], rtol=1e-6)
    with pytest.raises(MessageMismatchError, match=r"index 1 of path 'poses.1.position.x' is out of range \(1\)"):
        env.vector(SimpleNamespace(poses=[pose(0, 0, 0)]))
    data = yaml.safe_load((CONTRACTS / "so101_sim.yaml").read_text())
    data["features"]["observation.environment_state"]["field"] = []
    with pytest.raises(ContractError, match="must be a dotted path or a list of them"):
        Contract.from_dict(data)


@pytest.mark.parametrize("encoding", ["rgb8", "bgr8", "mono8"])
def test_image_decoding_to_rgb(encoding: str) -> None:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, size=(4, 6, 3), dtype=np.uint8)
    if encoding == "mono8":
        rgb[:, :, 1] = rgb[:, :, 2] = rgb[:, :, 0]
    height, width, enc, step, data = encode_image(rgb, encoding)
    msg = SimpleNamespace(height=height, width=width, encoding=enc, step=step, data=data, is_bigendian=0)
    np.testing.assert_array_equal(decode_color(msg, "sensor_msgs/msg/Image"), rgb)


def test_image_row_padding_depth_rejection_and_shape_mismatch() -> None:
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    padded = np.zeros((2, 12), dtype=np.uint8)
    padded[:, :9] = rgb.reshape(2, 9)
    msg = SimpleNamespace(height=2, width=3, encoding="rgb8", step=12, data=padded.reshape(-1), is_bigendian=0)
    np.testing.assert_array_equal(decode_color(msg, "sensor_msgs/msg/Image"), rgb)
    depth = SimpleNamespace(height=2, width=3, encoding="16UC1", step=6, data=np.zeros(12, np.uint8), is_bigendian=0)
    with pytest.raises(MessageMismatchError, match=r"depth encoding.*dtype: depth"):
        decode_color(depth, "sensor_msgs/msg/Image")
    odd = SimpleNamespace(height=2, width=3, encoding="yuv422", step=6, data=np.zeros(12, np.uint8), is_bigendian=0)
    with pytest.raises(MessageMismatchError, match="unsupported image encoding 'yuv422'"):
        decode_color(odd, "sensor_msgs/msg/Image")
    contract = load_contract(CONTRACTS / "so101.yaml")
    with pytest.raises(MessageMismatchError, match="3x2 images but the contract declares shape"):
        contract.features["observation.images.front"].picture(msg)


def test_depth_feature_in_metres() -> None:
    contract = Contract.from_dict(
        {
            "robot_type": "cam",
            "fps": 30,
            "features": {
                "observation.depth": {"topic": "/d", "type": "sensor_msgs/msg/Image", "shape": [1, 2], "dtype": "depth"}
            },
        }
    )
    raw = np.array([1000, 2500], dtype="<u2")
    msg = SimpleNamespace(height=1, width=2, encoding="16UC1", step=4, data=raw.view(np.uint8), is_bigendian=0)
    np.testing.assert_allclose(contract.features["observation.depth"].picture(msg), [[1.0, 2.5]])


def test_rclpy_messages_convert_like_rosbags_ones() -> None:
    """rosidl-generated messages (array.array fields) go through the same contract code."""
    import cv2
    from sensor_msgs.msg import CompressedImage, Image, JointState

    contract = load_contract(CONTRACTS / "so101.yaml")
    msg = JointState()
    msg.name = list(reversed(SO101_JOINTS))
    msg.position = [0.0, 0.1, 0.2, 0.3, 0.4, math.pi / 2]
    np.testing.assert_allclose(contract.features["action"].vector(msg)[0], 90.0, rtol=1e-6)
    rgb = np.random.default_rng(1).integers(0, 255, size=(480, 640, 3), dtype=np.uint8)
    image = Image()
    image.height, image.width, image.encoding, image.step = 480, 640, "bgr8", 640 * 3
    image.data = rgb[:, :, ::-1].tobytes()
    np.testing.assert_array_equal(contract.features["observation.images.front"].value(image), rgb)
    compressed = CompressedImage()
    compressed.format = "png"
    compressed.data = cv2.imencode(".png", rgb[:, :, ::-1])[1].tobytes()
    np.testing.assert_array_equal(decode_color(compressed, "sensor_msgs/msg/CompressedImage"), rgb)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_joint_value_refuses_the_sample(bad: float) -> None:
    """Issue 18 #3: NaN/inf positions used to pass into the dataset; the contract refuses the sample."""
    contract = load_contract(CONTRACTS / "so101.yaml")
    state = contract.features["observation.state"]
    positions = [0.1, 0.2, bad, 0.3, 0.0, 0.5]
    msg = SimpleNamespace(name=SO101_JOINTS, position=positions)
    with pytest.raises(NonFiniteValueError, match=r"observation.state: /follower/joint_states .*elbow_flex=") as info:
        state.raw_vector(msg)
    assert isinstance(info.value, MessageMismatchError)  # every caller that refuses bad messages refuses it
    with pytest.raises(NonFiniteValueError):
        state.vector(msg)
    # A joint the contract does not select may be anything: only the selected values matter.
    extra = SimpleNamespace(name=[*SO101_JOINTS, "camera_tilt"], position=[0.0] * 6 + [bad])
    assert np.isfinite(state.vector(extra)).all()


def test_conversion_overflow_is_refused_too() -> None:
    contract = load_contract(CONTRACTS / "so101.yaml")
    state = contract.features["observation.state"]
    with pytest.raises(NonFiniteValueError, match="non-finite"):
        state.vector(SimpleNamespace(name=SO101_JOINTS, position=[1e308, 0, 0, 0, 0, 0]))  # deg overflows float32


def test_non_finite_depth_pixels_become_zero() -> None:
    contract = Contract.from_dict(
        {
            "robot_type": "cam",
            "fps": 30,
            "features": {
                "observation.depth": {"topic": "/d", "type": "sensor_msgs/msg/Image", "shape": [1, 3], "dtype": "depth"}
            },
        }
    )
    raw = np.array([1.5, np.nan, np.inf], dtype="<f4")
    msg = SimpleNamespace(height=1, width=3, encoding="32FC1", step=12, data=raw.view(np.uint8), is_bigendian=0)
    np.testing.assert_array_equal(contract.features["observation.depth"].picture(msg), [[1.5, 0.0, 0.0]])
