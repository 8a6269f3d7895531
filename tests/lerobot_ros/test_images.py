"""numpy <-> Image / CompressedImage conversions, on plain objects and on real sensor_msgs messages."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lerobot_ros import images
from lerobot_ros.images import ImageConversionError

RNG = np.random.default_rng(7)
ARRAYS = {
    "rgb8": RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8),
    "bgr8": RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8),
    "rgba8": RNG.integers(0, 256, (5, 7, 4), dtype=np.uint8),
    "mono8": RNG.integers(0, 256, (5, 7), dtype=np.uint8),
    "16UC1": RNG.integers(0, 65536, (5, 7), dtype=np.uint16),
    "mono16": RNG.integers(0, 65536, (5, 7), dtype=np.uint16),
    "32FC1": RNG.random((5, 7), dtype=np.float32),
}


@pytest.mark.parametrize("encoding", sorted(ARRAYS))
def test_every_encoding_round_trips_through_a_real_message(encoding: str) -> None:
    from sensor_msgs.msg import Image

    pixels = ARRAYS[encoding]
    msg = images.array_to_image(pixels, encoding).fill(Image())
    assert (msg.height, msg.width, msg.encoding) == (5, 7, encoding)
    assert msg.step * msg.height == len(msg.data)
    back = images.image_to_array(msg)
    assert back.dtype == pixels.dtype
    np.testing.assert_array_equal(back, pixels)


def test_colour_encodings_decode_to_rgb() -> None:
    rgb = ARRAYS["rgb8"]
    for encoding in ("rgb8", "bgr8"):
        fields = images.rgb_to_image(rgb, encoding)
        np.testing.assert_array_equal(images.image_to_rgb(fields), rgb)
    bgr = images.array_to_image(np.ascontiguousarray(rgb[:, :, ::-1]), "bgr8")
    np.testing.assert_array_equal(images.image_to_array(bgr)[:, :, 0], rgb[:, :, 2])
    mono = images.rgb_to_image(rgb, "mono8")
    decoded = images.image_to_rgb(mono)
    assert decoded.shape == rgb.shape and np.all(decoded[:, :, 0] == decoded[:, :, 1])
    import cv2

    np.testing.assert_allclose(images.image_to_array(mono), cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), atol=1)


def test_row_padding_and_big_endian_are_honoured() -> None:
    depth = ARRAYS["16UC1"]
    padded = np.zeros((5, 16), dtype=np.uint8)
    padded[:, :14] = depth.astype(">u2").view(np.uint8).reshape(5, 14)
    msg = SimpleNamespace(height=5, width=7, encoding="16UC1", is_bigendian=1, step=16, data=padded.reshape(-1))
    np.testing.assert_array_equal(images.image_to_array(msg), depth)


def test_jpeg_round_trip_is_close_and_quality_matters() -> None:
    x = np.linspace(0, 255, 64, dtype=np.float32)
    rgb = np.stack(np.broadcast_arrays(x[None, :], x[:, None], 255 - x[None, :]), axis=2).astype(np.uint8)
    high = images.encode_jpeg(rgb, 95)
    low = images.encode_jpeg(rgb, 10)
    assert high[:2] == b"\xff\xd8" and len(low) < len(high)
    from sensor_msgs.msg import CompressedImage

    msg = CompressedImage(format=images.compressed_format(), data=high)
    back = images.decode_compressed(msg)
    assert back.shape == rgb.shape
    assert np.abs(back.astype(int) - rgb.astype(int)).mean() < 3.0
    assert np.abs(images.decode_compressed(low).astype(int) - rgb.astype(int)).mean() > 2 * (
        np.abs(back.astype(int) - rgb.astype(int)).mean()
    )


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(ImageConversionError, match=r"unsupported image encoding 'yuv422'.*rgb8"):
        images.array_to_image(ARRAYS["rgb8"], "yuv422")
    with pytest.raises(ImageConversionError, match=r"\(H, W, 3\).*\(5, 7\)"):
        images.array_to_image(ARRAYS["mono8"], "rgb8")
    with pytest.raises(ImageConversionError, match="needs dtype uint16"):
        images.array_to_image(ARRAYS["mono8"], "16UC1")
    short = SimpleNamespace(height=5, width=7, encoding="rgb8", is_bigendian=0, step=21, data=b"\x00" * 50)
    with pytest.raises(ImageConversionError, match="truncated"):
        images.image_to_array(short)
    with pytest.raises(ImageConversionError, match="could not be decoded"):
        images.decode_compressed(SimpleNamespace(format="jpeg", data=b"not a jpeg"))
    with pytest.raises(ImageConversionError, match="quality"):
        images.encode_jpeg(ARRAYS["rgb8"], 0)
    with pytest.raises(ImageConversionError, match="depth encoding"):
        images.image_to_rgb(images.array_to_image(ARRAYS["16UC1"], "16UC1"))


def test_module_imports_no_rclpy() -> None:
    import subprocess
    import sys

    code = "import sys, lerobot_ros.images; assert 'rclpy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
