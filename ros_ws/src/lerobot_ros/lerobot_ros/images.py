"""numpy arrays <-> `sensor_msgs/Image` and `CompressedImage` fields, without cv_bridge.

Pure: works on any object with the fields of `sensor_msgs/msg/Image` (``height, width, encoding,
is_bigendian, step, data``) or `sensor_msgs/msg/CompressedImage` (``format, data``), so rclpy messages,
rosbags-deserialized messages and plain dataclasses all work; rclpy is never imported. JPEG goes through
OpenCV (imported when first needed).

Array layouts: ``rgb8``/``bgr8``/``8UC3`` are (H, W, 3) uint8, ``rgba8``/``bgra8`` (H, W, 4) uint8,
``mono8``/``8UC1`` (H, W) uint8, ``16UC1``/``mono16`` (H, W) uint16, ``32FC1`` (H, W) float32. Rows may be
padded in a message (``step`` > width x pixel size); decoding drops the padding, encoding writes none.
"""

from __future__ import annotations

import array
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IMAGE_TYPE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"

# encoding -> (numpy dtype, channels)
ENCODINGS: dict[str, tuple[str, int]] = {
    "rgb8": ("u1", 3),
    "bgr8": ("u1", 3),
    "8UC3": ("u1", 3),
    "rgba8": ("u1", 4),
    "bgra8": ("u1", 4),
    "mono8": ("u1", 1),
    "8UC1": ("u1", 1),
    "16UC1": ("u2", 1),
    "mono16": ("u2", 1),
    "32FC1": ("f4", 1),
}
COLOR_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8", "mono8", "8UC1", "8UC3")
DEPTH_ENCODINGS = ("16UC1", "mono16", "32FC1")
JPEG_FORMAT = "jpeg"

UInt8Image = npt.NDArray[np.uint8]


class ImageConversionError(ValueError):
    """An image message or array cannot be converted (unknown encoding, wrong shape, truncated or corrupt data)."""


@dataclass(frozen=True)
class ImageFields:
    """The fields of a `sensor_msgs/Image` holding one array (``data`` is the row-major bytes, no padding)."""

    height: int
    width: int
    encoding: str
    is_bigendian: int
    step: int
    data: npt.NDArray[np.uint8]

    def fill(self, msg: Any) -> Any:
        """Set these fields on `msg` (an Image message or any object with its fields); returns `msg`."""
        msg.height = self.height
        msg.width = self.width
        msg.encoding = self.encoding
        msg.is_bigendian = self.is_bigendian
        msg.step = self.step
        msg.data = message_data(msg, self.data.tobytes())
        return msg


def message_data(msg: Any, data: bytes) -> Any:
    """`data` as a message's uint8[] field wants it: `array.array('B')` for rclpy messages (a numpy array
    assigned there is converted one value at a time: ~100 ms for 640x480), a numpy array for other message
    classes (rosbags)."""
    if hasattr(type(msg), "SLOT_TYPES"):
        return array.array("B", data)
    return np.frombuffer(data, dtype=np.uint8)


def _spec(encoding: str) -> tuple[str, int]:
    spec = ENCODINGS.get(encoding)
    if spec is None:
        raise ImageConversionError(f"unsupported image encoding {encoding!r}; supported: {', '.join(ENCODINGS)}")
    return spec


def message_bytes(msg: Any) -> UInt8Image:
    """The message's `data` as a flat uint8 array, without copying when it exposes a buffer."""
    data = msg.data
    if isinstance(data, np.ndarray):
        return data.view(np.uint8).reshape(-1)
    if isinstance(data, (bytes, bytearray, memoryview, array.array)):
        # rclpy gives uint8[] as array.array('B'), rosbags as numpy arrays.
        return np.frombuffer(data, dtype=np.uint8)
    return np.asarray(data, dtype=np.uint8).reshape(-1)


def image_to_array(msg: Any) -> npt.NDArray[Any]:
    """An Image message's pixels as an array in the encoding's own layout (see the module docstring)."""
    encoding = str(msg.encoding)
    kind, channels = _spec(encoding)
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    itemsize = np.dtype(kind).itemsize
    row = width * channels * itemsize
    buf = message_bytes(msg)
    if step < row or buf.size < step * height:
        raise ImageConversionError(
            f"image data is {buf.size} bytes for {height}x{width} {encoding} with step {step}: truncated message"
        )
    rows = buf[: step * height].reshape(height, step)[:, :row]
    dtype = np.dtype(kind).newbyteorder(">" if msg.is_bigendian else "<") if itemsize > 1 else np.dtype(kind)
    pixels = np.ascontiguousarray(rows).view(dtype).astype(np.dtype(kind).newbyteorder("="), copy=False)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return pixels.reshape(shape)


def array_to_image(pixels: npt.NDArray[Any], encoding: str) -> ImageFields:
    """The Image fields holding `pixels` (laid out as the encoding says) in `encoding`, little-endian."""
    kind, channels = _spec(encoding)
    expected = 2 if channels == 1 else 3
    if pixels.ndim != expected or (channels > 1 and pixels.shape[2] != channels):
        layout = "(H, W)" if channels == 1 else f"(H, W, {channels})"
        raise ImageConversionError(f"{encoding} needs a {layout} array, got shape {tuple(pixels.shape)}")
    if pixels.dtype != np.dtype(kind):
        raise ImageConversionError(f"{encoding} needs dtype {np.dtype(kind)}, got {pixels.dtype}")
    data = np.ascontiguousarray(pixels, dtype=np.dtype(kind).newbyteorder("<"))
    height, width = int(pixels.shape[0]), int(pixels.shape[1])
    step = width * channels * np.dtype(kind).itemsize
    return ImageFields(height, width, encoding, 0, step, data.view(np.uint8).reshape(-1))


def rgb_to_image(rgb: UInt8Image, encoding: str = "rgb8") -> ImageFields:
    """Image fields for an (H, W, 3) RGB uint8 array in a colour encoding (rgb8, bgr8 or mono8)."""
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ImageConversionError(f"expected an (H, W, 3) RGB array, got shape {tuple(rgb.shape)}")
    if encoding == "rgb8":
        return array_to_image(rgb, "rgb8")
    if encoding == "bgr8":
        return array_to_image(np.ascontiguousarray(rgb[:, :, ::-1]), "bgr8")
    if encoding == "mono8":
        return array_to_image(rgb_to_mono(rgb), "mono8")
    raise ImageConversionError(f"cannot encode an RGB image as {encoding!r}; use rgb8, bgr8 or mono8")


def rgb_to_mono(rgb: UInt8Image) -> UInt8Image:
    """ITU-R BT.601 luma of an RGB image, as OpenCV's RGB2GRAY computes it."""
    weights = np.array([0.299, 0.587, 0.114], dtype=np.float32)
    luma = np.rint(rgb.astype(np.float32) @ weights)
    mono: UInt8Image = np.clip(luma, 0, 255).astype(np.uint8)
    return mono


def image_to_rgb(msg: Any) -> UInt8Image:
    """An 8-bit colour or mono Image message as an (H, W, 3) RGB uint8 array."""
    encoding = str(msg.encoding)
    if encoding in DEPTH_ENCODINGS:
        raise ImageConversionError(f"{encoding} is a depth encoding, not a colour image")
    pixels = image_to_array(msg)
    if pixels.ndim == 2:
        return np.repeat(pixels[:, :, None], 3, axis=2)
    if encoding.startswith("bgr"):
        return np.ascontiguousarray(pixels[:, :, 2::-1])
    return np.ascontiguousarray(pixels[:, :, :3])


def encode_jpeg(rgb: UInt8Image, quality: int = 90) -> bytes:
    """JPEG bytes of an (H, W, 3) RGB image (or an (H, W) mono one); `quality` 1..100."""
    import cv2

    if not 1 <= quality <= 100:
        raise ImageConversionError(f"JPEG quality must be 1..100, got {quality}")
    if rgb.ndim == 3 and rgb.shape[2] == 3:
        pixels = np.ascontiguousarray(rgb[:, :, ::-1])
    elif rgb.ndim == 2:
        pixels = rgb
    else:
        raise ImageConversionError(f"JPEG needs an (H, W, 3) RGB or (H, W) mono array, got shape {tuple(rgb.shape)}")
    ok, buf = cv2.imencode(".jpg", pixels, [int(cv2.IMWRITE_JPEG_QUALITY), int(quality)])
    if not ok:
        raise ImageConversionError(f"OpenCV could not JPEG-encode a {tuple(rgb.shape)} {rgb.dtype} array")
    return bytes(buf)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, extended, progressive, lossless; Huffman and arithmetic): they carry the size.
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
# Markers without a length field (TEM, RST0-7, SOI).
_JPEG_STANDALONE = frozenset({0x01, 0xD0, 0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8})
# Segments read before giving up on finding a JPEG's frame header (real files have fewer than 20 before it).
_JPEG_MAX_SEGMENTS = 256


def compressed_dimensions(data: Any) -> tuple[int, int] | None:
    """(height, width) that a PNG (IHDR) or JPEG (start-of-frame segment) header declares, read without decoding;
    None when `data` (bytes, or an object with `data`) starts like neither or its header is damaged."""
    if isinstance(data, np.ndarray):
        buf = data.tobytes()
    else:
        buf = message_bytes(data).tobytes() if hasattr(data, "data") else bytes(data)
    if buf.startswith(_PNG_SIGNATURE):
        if len(buf) < 24 or buf[12:16] != b"IHDR":
            return None
        width, height = int.from_bytes(buf[16:20], "big"), int.from_bytes(buf[20:24], "big")
        return height, width
    if not buf.startswith(b"\xff\xd8"):
        return None
    pos = 2
    for _ in range(_JPEG_MAX_SEGMENTS):
        while pos < len(buf) and buf[pos] == 0xFF:
            pos += 1  # a marker, possibly preceded by fill bytes
        if pos == 2 or pos >= len(buf) or buf[pos - 1] != 0xFF:
            return None
        marker = buf[pos]
        pos += 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker in (0xD9, 0xDA) or pos + 2 > len(buf):
            return None  # end of image or scan data before any frame header
        length = int.from_bytes(buf[pos : pos + 2], "big")
        if marker in _JPEG_SOF:
            if length < 8 or pos + 7 > len(buf):
                return None
            return int.from_bytes(buf[pos + 3 : pos + 5], "big"), int.from_bytes(buf[pos + 5 : pos + 7], "big")
        pos += length
    return None


def decode_compressed(data: Any, max_pixels: int | None = None) -> UInt8Image:
    """JPEG or PNG bytes (or an array / CompressedImage-like object with `data`) as an (H, W, 3) RGB array.

    `max_pixels`: an image whose header declares more pixels (or that has no readable JPEG/PNG header) is refused
    before it is decoded (a small file can declare a huge image: decoding it takes seconds and gigabytes).
    """
    import cv2

    buf = message_bytes(data) if hasattr(data, "data") else np.frombuffer(bytes(data), dtype=np.uint8)
    if max_pixels is not None:
        size = compressed_dimensions(buf)
        if size is None:
            raise ImageConversionError(f"compressed image ({buf.size} bytes) has no readable JPEG or PNG header")
        if size[0] * size[1] > max_pixels:
            raise ImageConversionError(
                f"compressed image declares {size[1]}x{size[0]} pixels, more than the {max_pixels} allowed; not decoded"
            )
    image = cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None
    if image is None:
        fmt = getattr(data, "format", "")
        raise ImageConversionError(f"compressed image (format {fmt!r}, {buf.size} bytes) could not be decoded")
    return np.ascontiguousarray(image[:, :, ::-1])


def compressed_format(encoding: str = "rgb8") -> str:
    """The CompressedImage `format` string image_transport uses for JPEG from `encoding`."""
    return f"{encoding}; jpeg compressed bgr8"
