"""Damaged image messages are recognised without decoding them (`FeatureContract.image_problem`), and a compressed
image declaring more pixels than the contract's shape is never decoded (a 20000x20000 PNG of a few hundred KB took
74 s and 2.47 GB before it was refused)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np
import pytest

from lerobot_bags.synthetic import png_declaring
from lerobot_contract import Contract, MessageMismatchError
from lerobot_ros.images import compressed_dimensions, encode_jpeg

SHAPE = [24, 32, 3]


def _feature(msgtype: str) -> Any:
    contract = Contract.from_dict(
        {
            "robot_type": "cam",
            "fps": 10,
            "features": {"observation.images.front": {"topic": "/cam", "type": msgtype, "shape": SHAPE}},
        }
    )
    return contract.features["observation.images.front"]


def _image(height: int = 24, width: int = 32, encoding: str = "rgb8", step: int | None = None) -> SimpleNamespace:
    channels = 3 if encoding == "rgb8" else 1
    step = width * channels if step is None else step
    data = np.zeros(height * step, dtype=np.uint8)
    return SimpleNamespace(height=height, width=width, encoding=encoding, is_bigendian=0, step=step, data=data)


def test_compressed_dimensions_read_from_headers() -> None:
    rgb = np.random.default_rng(0).integers(0, 255, (24, 32, 3), dtype=np.uint8)
    ok, png = cv2.imencode(".png", rgb)
    ok2, progressive = cv2.imencode(".jpg", rgb, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])
    assert ok and ok2
    assert compressed_dimensions(encode_jpeg(rgb)) == (24, 32)
    assert compressed_dimensions(bytes(png)) == (24, 32)
    assert compressed_dimensions(bytes(progressive)) == (24, 32)
    assert compressed_dimensions(png_declaring(20000, 20000)) == (20000, 20000)
    for garbage in (b"", b"\xff\xd8", b"\xff\xd8\xff\xda\x00\x02", b"not an image at all", encode_jpeg(rgb)[:3]):
        assert compressed_dimensions(garbage) is None, garbage


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        (_image(0, 0), "image is 0x0"),
        (_image(step=32), "step 32 is shorter than a row of 32 rgb8 pixels"),  # rgb8 whose step says mono
        (_image(encoding="32FC1", step=128), "32FC1 is a depth encoding"),
        (_image(encoding="yuv422", step=64), "encoding 'yuv422' is not one of"),
        (_image(48, 64), "image is 64x48, the contract declares shape [24, 32, 3]"),
        (SimpleNamespace(**{**vars(_image()), "data": np.zeros(10, dtype=np.uint8)}), "data is shorter"),
    ],
)
def test_damaged_raw_images_are_named(image: Any, reason: str) -> None:
    feat = _feature("sensor_msgs/msg/Image")
    problem = feat.image_problem(image)
    assert problem is not None and reason in problem
    assert feat.image_problem(_image()) is None


def test_damaged_compressed_images_are_named_and_never_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    feat = _feature("sensor_msgs/msg/CompressedImage")
    good = SimpleNamespace(format="jpeg", data=np.frombuffer(encode_jpeg(np.zeros((24, 32, 3), np.uint8)), np.uint8))
    assert feat.image_problem(good) is None
    garbage = SimpleNamespace(format="jpeg", data=np.frombuffer(b"\xff\xd8 garbage, no frame header", np.uint8))
    assert "not a JPEG or PNG, or its header is damaged" in (feat.image_problem(garbage) or "")
    bomb = SimpleNamespace(format="png", data=np.frombuffer(png_declaring(20000, 20000), np.uint8))
    assert "is 20000x20000, the contract declares shape [24, 32, 3]" in (feat.image_problem(bomb) or "")

    def no_decoding(*args: Any) -> None:
        raise AssertionError("decoded")

    monkeypatch.setattr(cv2, "imdecode", no_decoding)
    with pytest.raises(MessageMismatchError, match="declares 20000x20000 pixels, more than the 768 allowed"):
        feat.value(bomb)
