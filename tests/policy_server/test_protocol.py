"""The wire protocol: round trips of every message, and malformed frames refused with a message naming why."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from lerobot_policy_server import protocol
from lerobot_policy_server.protocol import (
    ErrorCode,
    FeatureSpec,
    PolicyInfo,
    PredictReply,
    PredictRequest,
    ProtocolError,
)

INFO = PolicyInfo(
    policy_type="act",
    name="ckpt",
    backend="lerobot",
    device="cpu",
    inputs=(FeatureSpec("observation.state", (6,), "float32", False),
            FeatureSpec("observation.images.front", (48, 64, 3), "uint8", True)),
    action_dim=6,
    horizon=5,
    action_names=tuple(f"j{i}.pos" for i in range(6)),
    fps=30.0,
    language=True,
    contract={"fps": 30},
)  # fmt: skip


def test_info_round_trip() -> None:
    assert protocol.decode_info(protocol.encode_info(INFO)) == INFO


def test_predict_request_and_reply_round_trip_bit_exact() -> None:
    rng = np.random.default_rng(0)
    observation = {
        "observation.state": rng.normal(size=6).astype(np.float32),
        "observation.images.front": rng.integers(0, 256, size=(48, 64, 3), dtype=np.uint8),
    }
    request = protocol.decode_predict_request(
        protocol.encode_predict_request(PredictRequest(1_700_000_000_123_456_789, "pick the cube", observation))
    )
    assert request.stamp_ns == 1_700_000_000_123_456_789 and request.task == "pick the cube"
    for key, value in observation.items():
        assert request.observation[key].dtype == value.dtype
        np.testing.assert_array_equal(request.observation[key], value)
    actions = rng.normal(size=(5, 6))
    reply = protocol.decode_predict_reply(
        protocol.encode_predict_reply(PredictReply(7, "t", actions, 0.25, INFO.action_names))
    )
    assert reply.actions.dtype == np.float64 and reply.inference_time_s == 0.25
    np.testing.assert_array_equal(reply.actions, actions)
    assert reply.action_names == INFO.action_names


def test_a_big_endian_array_arrives_with_its_values() -> None:
    values = np.arange(4, dtype=">f4")
    frame = protocol.encode_predict_request(PredictRequest(0, "", {"x": values}))
    np.testing.assert_array_equal(protocol.decode_predict_request(frame).observation["x"], [0, 1, 2, 3])


def _frame(header: dict, payload: bytes = b"", version: int = protocol.PROTOCOL_VERSION, kind: int = 3) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<4sHHI", protocol.MAGIC, version, kind, len(text)) + text + payload


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (b"LRP", "shorter"),
        (b"XXXX" + bytes(8), "bad magic"),
        (_frame({"stamp_ns": 0, "task": "", "tensors": []}, kind=1), "expected a PREDICT_REQUEST"),
        (_frame({"stamp_ns": 0, "task": "", "tensors": [
            {"name": "x", "dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}]}, bytes(8)), "dtype 'object'"),
        (_frame({"stamp_ns": 0, "task": "", "tensors": [
            {"name": "x", "dtype": "float32", "shape": [3], "offset": 0, "nbytes": 8}]}, bytes(8)), "do not hold"),
        (_frame({"stamp_ns": 0, "task": "", "tensors": [
            {"name": "x", "dtype": "float32", "shape": [4], "offset": 4, "nbytes": 16}]}, bytes(16)), "beyond"),
        (_frame({"stamp_ns": 0, "task": "", "tensors": [
            {"name": "x", "dtype": "float32", "shape": [-1], "offset": 0, "nbytes": 4}]}, bytes(4)), "shape"),
        (_frame({"stamp_ns": "0", "task": "", "tensors": []}), "stamp_ns"),
        (_frame({"stamp_ns": True, "task": "", "tensors": []}), "stamp_ns"),
        (_frame({"stamp_ns": 0, "task": 3, "tensors": []}), "task"),
    ],
)  # fmt: skip
def test_malformed_frames_are_refused_with_the_reason(frame: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words) as info:
        protocol.decode_predict_request(frame)
    assert info.value.code is ErrorCode.INVALID_ARGUMENT
    assert "\n" not in str(info.value)


def test_a_pickle_is_not_a_frame() -> None:
    import pickle

    with pytest.raises(ProtocolError, match="bad magic"):
        protocol.decode_predict_request(pickle.dumps({"observation.state": np.zeros(6)}))


def test_another_protocol_version_is_a_failed_precondition() -> None:
    with pytest.raises(ProtocolError, match="protocol version 2") as info:
        protocol.decode_predict_request(_frame({"stamp_ns": 0, "task": "", "tensors": []}, version=2))
    assert info.value.code is ErrorCode.FAILED_PRECONDITION


def test_objects_cannot_be_sent() -> None:
    with pytest.raises(ProtocolError, match="dtype object"):
        protocol.encode_predict_request(PredictRequest(0, "", {"x": np.array([{"a": 1}], dtype=object)}))


def test_check_observation_names_the_feature_and_what_it_needs() -> None:
    good = {"observation.state": np.zeros(6, np.float32), "observation.images.front": np.zeros((48, 64, 3), np.uint8)}
    protocol.check_observation(INFO.inputs, good)
    with pytest.raises(ProtocolError, match=r"lacks 'observation\.images\.front'"):
        protocol.check_observation(INFO.inputs, {"observation.state": good["observation.state"]})
    with pytest.raises(ProtocolError, match=r"'observation.images.front': got uint8 \(64, 48, 3\), the policy needs"):
        protocol.check_observation(INFO.inputs, {**good, "observation.images.front": np.zeros((64, 48, 3), np.uint8)})
    with pytest.raises(ProtocolError, match="float64"):
        protocol.check_observation(INFO.inputs, {**good, "observation.state": np.zeros(6)})


def test_the_protocol_module_imports_no_grpc_and_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, lerobot_policy_server.protocol; print(sorted({'grpc', 'torch', 'rclpy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
