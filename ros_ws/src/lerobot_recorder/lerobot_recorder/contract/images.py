"""Image and CompressedImage messages -> numpy arrays, without cv_bridge.

Works on any object with the fields of `sensor_msgs/msg/Image` (``height, width, encoding, is_bigendian,
step, data``) or `sensor_msgs/msg/CompressedImage` (``format, data``): rclpy messages and rosbags-deserialized
ones alike.
"""

from __future__ import annotations

import array
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_recorder.contract.errors import MessageMismatchError

IMAGE_TYPE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"

COLOR_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8", "mono8", "8UC1", "8UC3")
DEPTH_ENCODINGS = ("16UC1", "mono16", "32FC1")

UInt8Image = npt.NDArray[np.uint8]
FloatImage = npt.NDArray[np.float32]


def _buffer(msg: Any) -> npt.NDArray[np.uint8]:
    """The message's `data` as a flat uint8 array, without copying when it exposes a buffer."""
    data = msg.data
    if isinstance(data, np.ndarray):
        return data.view(np.uint8).reshape(-1)
    if isinstance(data, (bytes, bytearray, memoryview, array.array)):
        # rclpy gives uint8[] as array.array('B'), rosbags as numpy arrays.
        return np.frombuffer(data, dtype=np.uint8)
    return np.asarray(data, dtype=np.uint8).reshape(-1)


def _rows(msg: Any, bytes_per_pixel: int) -> npt.NDArray[np.uint8]:
    """The pixel bytes as (height, width * bytes_per_pixel), dropping row padding (`step`)."""
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    row = width * bytes_per_pixel
    buf = _buffer(msg)
    if step < row or buf.size < step * height:
        raise MessageMismatchError(
            f"image data is {buf.size} bytes for {height}x{width} {msg.encoding} with step {step}: truncated message"
        )
    return buf[: step * height].reshape(height, step)[:, :row]


def decode_color(msg: Any, msgtype: str) -> UInt8Image:
    """An 8-bit colour or mono image message as an (H, W, 3) RGB uint8 array."""
    if msgtype == COMPRESSED_IMAGE_TYPE:
        return _decode_compressed(msg)
    encoding = str(msg.encoding)
    height, width = int(msg.height), int(msg.width)
    if encoding in DEPTH_ENCODINGS:
        raise MessageMismatchError(
            f"{encoding} is a depth encoding and cannot be stored as a colour video/image feature; "
            "declare the feature with `dtype: depth` to store it as a float32 array in metres"
        )
    if encoding in ("mono8", "8UC1"):
        mono = _rows(msg, 1)
        return np.repeat(mono[:, :, None], 3, axis=2)
    channels = {"rgb8": 3, "bgr8": 3, "8UC3": 3, "rgba8": 4, "bgra8": 4}.get(encoding)
    if channels is None:
        raise MessageMismatchError(
            f"unsupported image encoding {encoding!r}; supported: {', '.join(COLOR_ENCODINGS)} (and depth "
            f"{', '.join(DEPTH_ENCODINGS)} with `dtype: depth`)"
        )
    pixels = _rows(msg, channels).reshape(height, width, channels)
    if encoding.startswith("bgr"):
        return np.ascontiguousarray(pixels[:, :, 2::-1])
    return np.ascontiguousarray(pixels[:, :, :3])


def decode_depth(msg: Any, msgtype: str, scale_m: float) -> FloatImage:
    """A depth image (16UC1/mono16 in units of `scale_m` metres, or 32FC1 metres) as (H, W) float32 metres."""
    if msgtype != IMAGE_TYPE:
        raise MessageMismatchError(f"depth features need {IMAGE_TYPE}, got {msgtype}")
    encoding = str(msg.encoding)
    height, width = int(msg.height), int(msg.width)
    big = bool(msg.is_bigendian)
    if encoding in ("16UC1", "mono16"):
        raw = _rows(msg, 2).reshape(-1).view(">u2" if big else "<u2").reshape(height, width)
        return (raw.astype(np.float32) * np.float32(scale_m)).astype(np.float32)
    if encoding == "32FC1":
        return _rows(msg, 4).reshape(-1).view(">f4" if big else "<f4").reshape(height, width).astype(np.float32)
    raise MessageMismatchError(f"depth feature got encoding {encoding!r}; use 16UC1, mono16 or 32FC1")


def _decode_compressed(msg: Any) -> UInt8Image:
    import cv2

    buf = _buffer(msg)
    image = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    if image is None:
        raise MessageMismatchError(f"CompressedImage with format {msg.format!r} could not be decoded (corrupt data?)")
    return np.ascontiguousarray(image[:, :, ::-1]).astype(np.uint8, copy=False)


def encode_image(rgb: UInt8Image, encoding: str = "rgb8") -> tuple[int, int, str, int, npt.NDArray[np.uint8]]:
    """(height, width, encoding, step, data) for an Image message holding `rgb` (an (H, W, 3) uint8 array)."""
    if encoding == "bgr8":
        pixels = np.ascontiguousarray(rgb[:, :, ::-1])
    elif encoding == "rgb8":
        pixels = np.ascontiguousarray(rgb)
    elif encoding == "mono8":
        pixels = np.ascontiguousarray(rgb[:, :, 0])
    else:
        raise MessageMismatchError(f"cannot encode images as {encoding!r}; use rgb8, bgr8 or mono8")
    height, width = int(rgb.shape[0]), int(rgb.shape[1])
    return height, width, encoding, int(pixels.strides[0]), pixels.reshape(-1)
