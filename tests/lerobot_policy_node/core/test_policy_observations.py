"""Observation assembly from contract topics, action mapping, the scripted policy."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ObservationError, PolicyConfigError
from lerobot_policy_node.core.observations import ActionMapping, ObservationAssembler, contract_inputs
from lerobot_policy_node.core.policies import InputFeature, parse_scripted

MS = 1_000_000
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
NAMES = [f"{j}.pos" for j in JOINTS]


def contract(**extra) -> Contract:
    return Contract.from_dict(
        {
            "robot_type": "so101_follower",
            "fps": 10,
            "units": {"grip": {"kind": "range", "in": [0.0, 1.0], "out": [0, 100]},
                      "arm": {"kind": "per_joint", "default": "rad_to_deg", "joints": {"gripper": "grip"}}},
            "features": {
                "observation.state": {"topic": "/arm/joint_states", "type": "sensor_msgs/msg/JointState",
                                      "joints": JOINTS, "names": NAMES, "units": "arm", "max_age_s": 0.2},
                "observation.images.front": {"topic": "/cam/image_raw", "type": "sensor_msgs/msg/Image",
                                             "shape": [8, 12, 3]},
                "action": {"topic": "/arm/joint_commands", "type": "sensor_msgs/msg/JointState",
                           "joints": JOINTS, "names": NAMES, "units": "arm"},
                **extra,
            },
        }
    )  # fmt: skip


def joint_state(positions) -> SimpleNamespace:
    return SimpleNamespace(name=list(reversed(JOINTS)), position=list(reversed(positions)))


def image(value: int) -> SimpleNamespace:
    data = np.full((8, 12, 3), value, dtype=np.uint8)
    return SimpleNamespace(height=8, width=12, encoding="rgb8", is_bigendian=0, step=36, data=data.tobytes())


def test_newest_frame_at_or_before_holds_converted_resized_values():
    c = contract()
    inputs = [InputFeature("observation.state", (6,), False), InputFeature("observation.images.front", (4, 6, 3), True)]
    assembler = ObservationAssembler(c, inputs, latency_s=0.0)
    assert assembler.waiting_for == ["observation.state", "observation.images.front"]
    base = 100 * NS
    assembler.start(base)  # messages stamped before the start are not used
    for k in range(6):  # joint states at 100 Hz-ish, camera at 10 Hz
        t = base + k * 40 * MS
        assembler.push("/arm/joint_states", joint_state([0.01 * k] * 5 + [0.5]), t, t + MS)
        if k % 3 == 0:
            assembler.push("/cam/image_raw", image(10 * k), t, t + MS)
    frame = assembler.newest()
    assert frame is not None
    observation = assembler.build(frame)
    # Frame grid at 10 fps from the first complete time (base); newest frame <= now: base + 200 ms
    assert observation["timestamp"] == pytest.approx((base + 200 * MS) / NS)
    # The newest joint state stamped at or before the frame time is k=5 (200 ms): 0.05 rad -> degrees.
    assert observation["observation.state"][:5] == pytest.approx([math.degrees(0.05)] * 5)
    assert observation["observation.state"][5] == pytest.approx(50.0)
    assert observation["observation.images.front"].shape == (4, 6, 3)
    assert observation["observation.images.front"][0, 0, 0] == 30  # the k=3 picture (120 ms), not a later one


def test_messages_from_beyond_max_clock_offset_are_ignored_and_counted():
    assembler = ObservationAssembler(contract(), contract_inputs(contract(), {"observation.state": (6,)}))
    assembler.push("/arm/joint_states", joint_state([0.0] * 6), 11 * NS + 500 * MS, 10 * NS)
    assert assembler.stats.future_samples == 1 and "future" in assembler.stats.last_problem
    assert "max_clock_offset 1 s" in assembler.stats.last_problem
    assert assembler.newest() is None
    assert assembler.clock_offset_ns is None


@pytest.mark.parametrize("offset_ms", [500, -500])
def test_stamps_on_another_hosts_clock_give_frames_on_that_clock(offset_ms):
    """The sender's clock is `offset_ms` behind this node's: frames stay on the sender's clock."""
    assembler = ObservationAssembler(contract(), contract_inputs(contract(), {"observation.state": (6,)}), latency_s=0)
    for k in range(6):
        stamp = 100 * NS + k * 100 * MS
        receive = stamp + offset_ms * MS + 2 * MS  # 2 ms on the wire
        assembler.push("/arm/joint_states", joint_state([0.1] * 6), stamp, receive)
    assert assembler.clock_offset_ns == (offset_ms + 2) * MS
    assert assembler.stamp_clock(receive) == stamp  # the smallest transport delay is part of the estimate
    frame = assembler.newest()
    assert frame is not None and frame.time_ns == 100 * NS + 500 * MS


def test_clock_jumping_back_restarts_the_frames():
    assembler = ObservationAssembler(contract(), contract_inputs(contract(), {"observation.state": (6,)}), latency_s=0)
    for k in range(5):
        t = 100 * NS + k * 100 * MS
        assembler.push("/arm/joint_states", joint_state([0.1] * 6), t, t)
    assert assembler.newest() is not None
    assembler.push("/arm/joint_states", joint_state([0.2] * 6), 1 * NS, 1 * NS)  # sim reset
    assert assembler.stats.clock_jumps == 1
    assert assembler.newest() is None
    for k in range(1, 4):
        t = 1 * NS + k * 100 * MS
        assembler.push("/arm/joint_states", joint_state([0.2] * 6), t, t)
    frame = assembler.newest()
    assert frame is not None and frame.time_ns < 2 * NS


def test_features_the_contract_cannot_supply_are_named():
    with pytest.raises(ObservationError, match=r"observation.images.wrist.*does not declare"):
        ObservationAssembler(contract(), [InputFeature("observation.images.wrist", (8, 12, 3), True)])
    with pytest.raises(ObservationError, match="takes 7 values"):
        ObservationAssembler(contract(), [InputFeature("observation.state", (7,), False)])


def test_action_mapping_converts_back_to_ros_units_and_checks_the_dimension():
    mapping = ActionMapping(contract(), 6, NAMES)
    assert mapping.joint_names == tuple(JOINTS)
    ros = mapping.to_ros(np.array([[90.0] * 5 + [50.0]]))
    assert ros[0] == pytest.approx([math.pi / 2] * 5 + [0.5])
    with pytest.raises(ObservationError, match="outputs 7 action values"):
        ActionMapping(contract(), 7)
    with pytest.raises(ObservationError, match="order must match"):
        ActionMapping(contract(), 6, list(reversed(NAMES)))


def test_scripted_policy_is_deterministic_and_starts_at_the_state():
    policy = parse_scripted("scripted:horizon=5,fps=10,amplitude=2,frequency=1", 6)
    observation = {"observation.state": np.arange(6.0), "timestamp": 3.0}
    chunk = policy.predict_chunk(observation)
    assert chunk.shape == (5, 6)
    assert chunk[0] == pytest.approx(np.arange(6.0))
    again = parse_scripted("scripted:horizon=5,fps=10,amplitude=2,frequency=1", 6)
    assert np.array_equal(again.predict_chunk(observation), chunk)
    later = policy.predict_chunk({**observation, "timestamp": 3.1})
    assert later[0] == pytest.approx(chunk[1])  # the same curve, one step on
    with pytest.raises(PolicyConfigError, match="unknown option 'speed'"):
        parse_scripted("scripted:speed=3", 6)
    faulty = parse_scripted("scripted:fault=nan", 6)
    faulty.predict_chunk(observation)
    assert np.isnan(faulty.predict_chunk(observation)).any()
    assert parse_scripted("scripted:fault=dim", 6).predict_chunk(observation).shape[1] == 7
