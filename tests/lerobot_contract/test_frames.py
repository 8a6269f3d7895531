"""FrameDecoder: the one frame -> feature-values decoder of the recorder, the bag converter and the policy node.

Each test pins what one of the three former decoders returned (recorder `sink.FrameValues`, bag converter
`convert._FrameBuilder`, policy `ObservationAssembler.build`), so the fold changed no value.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from lerobot_contract import Contract, MessageMismatchError, NonFiniteValueError
from lerobot_contract.align import AlignedFrame, Pick, Sample
from lerobot_contract.frames import FrameDecoder

CONTRACT = Contract.from_dict(
    {
        "robot_type": "test",
        "fps": 10,
        "units": {"half": {"kind": "scale", "factor": 0.5}},
        "features": {
            "observation.state": {
                "topic": "/j",
                "type": "sensor_msgs/msg/JointState",
                "joints": ["a", "b"],
                "units": "half",
            },
            "observation.images.cam": {"topic": "/c", "type": "sensor_msgs/msg/Image", "shape": [4, 4, 3]},
            "observation.images.depth": {
                "topic": "/d",
                "type": "sensor_msgs/msg/Image",
                "shape": [2, 3],
                "dtype": "depth",
            },
        },
    }
)
STATE, CAM, DEPTH = "observation.state", "observation.images.cam", "observation.images.depth"


def picture(value: int, size: int = 4) -> SimpleNamespace:
    """A duck-typed rgb8 sensor_msgs/Image."""
    data = np.full(size * size * 3, value, np.uint8).tobytes()
    return SimpleNamespace(height=size, width=size, encoding="rgb8", is_bigendian=0, step=size * 3, data=data)


def depth(values: list[float]) -> SimpleNamespace:
    data = np.asarray(values, np.float32).tobytes()
    return SimpleNamespace(height=2, width=3, encoding="32FC1", is_bigendian=0, step=12, data=data)


def joints(a: float, b: float) -> SimpleNamespace:
    return SimpleNamespace(name=["b", "a"], position=[b, a])


class CountingDeserialize:
    """(raw, msgtype) -> message, counting the calls; raw is the key of a message table."""

    def __init__(self, messages: dict[str, Any]) -> None:
        self.messages = messages
        self.calls: list[str] = []

    def __call__(self, raw: str, msgtype: str) -> Any:
        self.calls.append(raw)
        if raw == "garbage":
            raise KeyError("truncated CDR")
        return self.messages[raw]


def test_recorder_mode_casts_converted_vectors_and_decodes_each_image_once() -> None:
    deserialize = CountingDeserialize({"img1": picture(7), "img2": picture(9)})
    decoder = FrameDecoder(CONTRACT, deserialize, deserialize_errors=(KeyError,))
    held = Sample(100, 2, "img1")
    first = AlignedFrame(0, 100, {STATE: Pick(Sample(100, 1, np.array([1.5, -2.0]))), CAM: Pick(held)})
    second = AlignedFrame(1, 200, {STATE: Pick(Sample(200, 3, np.array([3.0, 4.0]))), CAM: Pick(held)})
    values = [decoder.build(first), decoder.build(second)]
    assert values[0][STATE].dtype == np.float32 and values[0][STATE].tolist() == [1.5, -2.0]
    assert values[1][CAM] is values[0][CAM] and int(values[1][CAM][0, 0, 0]) == 7
    assert deserialize.calls == ["img1"]  # the held image was decoded once
    third = AlignedFrame(2, 300, {CAM: Pick(Sample(300, 4, "img2"))})
    assert int(decoder.build(third)[CAM][0, 0, 0]) == 9
    decoder.reset()
    decoder.build(first)
    assert deserialize.calls == ["img1", "img2", "img1"]


def test_malformed_bytes_and_non_finite_vectors_are_frame_errors_naming_the_feature() -> None:
    decoder = FrameDecoder(CONTRACT, CountingDeserialize({}), deserialize_errors=(KeyError,))
    with pytest.raises(MessageMismatchError, match=rf"{CAM}: a sensor_msgs/msg/Image message cannot be deserialized"):
        decoder.value(CAM, Pick(Sample(0, 1, "garbage")))
    with pytest.raises(NonFiniteValueError, match=rf"{STATE}: non-finite value\(s\) \[1.0, nan\]"):
        decoder.value(STATE, Pick(Sample(0, 2, np.array([1.0, np.nan]))))
    with pytest.raises(NonFiniteValueError, match="non-finite"):  # finite in float64, inf in the float32 feature
        decoder.value(STATE, Pick(Sample(0, 3, np.array([1e39, 0.0]))))


def test_an_error_not_declared_by_the_caller_passes_through() -> None:
    """The bag converter's deserialize raises its own BagError naming the bag: it reaches the converter as is."""
    decoder = FrameDecoder(CONTRACT, CountingDeserialize({}))
    with pytest.raises(KeyError):
        decoder.value(CAM, Pick(Sample(0, 1, "garbage")))


def test_bag_mode_blends_linear_picks_like_the_converter() -> None:
    decoder = FrameDecoder(CONTRACT, CountingDeserialize({}))
    before, after = np.array([1.0, 10.0]), np.array([3.0, 20.0])
    value = decoder.value(STATE, Pick(Sample(0, 1, before), Sample(100, 2, after), alpha=0.25))
    expected = np.asarray(before + 0.25 * (after - before), dtype=np.float32)
    assert value.dtype == np.float32 and value.tolist() == expected.tolist() == [1.5, 12.5]


def test_depth_is_the_flat_dataset_value() -> None:
    decoder = FrameDecoder(CONTRACT, CountingDeserialize({"d": depth([0.5, 1.0, np.nan, 2.0, np.inf, 3.0])}))
    value = decoder.value(DEPTH, Pick(Sample(0, 1, "d")))
    assert value.shape == (6,) and value.tolist() == [0.5, 1.0, 0.0, 2.0, 0.0, 3.0]


def test_policy_mode_converts_message_vectors_and_decodes_pictures() -> None:
    decoder = FrameDecoder(CONTRACT, convert_vectors=True)
    feat = CONTRACT.features[STATE]
    msg = joints(2.0, -4.0)
    value = decoder.value(STATE, Pick(Sample(0, 1, msg)))
    assert value.dtype == np.float32 and value.tolist() == feat.vector(msg).tolist() == [1.0, -2.0]
    image = picture(5)
    np.testing.assert_array_equal(decoder.value(CAM, Pick(Sample(0, 2, image))), CONTRACT.features[CAM].picture(image))
    with pytest.raises(MessageMismatchError, match=r"joint\(s\) \['b'\] not in /j"):
        decoder.value(STATE, Pick(Sample(0, 3, SimpleNamespace(name=["a"], position=[1.0]))))


def test_a_new_sample_with_a_reused_sequence_number_is_decoded_again() -> None:
    """The policy node starts a new sampler (sequence numbers from 1 again) after a clock jump: the cache is per
    sample, so an image of the new sampler is never taken for the old one's."""
    decoder = FrameDecoder(CONTRACT, convert_vectors=True)
    assert int(decoder.value(CAM, Pick(Sample(0, 1, picture(1))))[0, 0, 0]) == 1
    assert int(decoder.value(CAM, Pick(Sample(0, 1, picture(2))))[0, 0, 0]) == 2
