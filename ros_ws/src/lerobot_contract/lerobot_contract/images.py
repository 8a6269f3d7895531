"""Image and CompressedImage messages -> the arrays a dataset stores (RGB uint8, depth float32 metres).

The conversions themselves live in `lerobot_ros.images` (shared with the camera drivers); this module
applies the contract's rules (colour features are RGB, depth features metres) and reports problems as
`MessageMismatchError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract.errors import MessageMismatchError
from lerobot_ros import images
from lerobot_ros.images import COLOR_ENCODINGS, COMPRESSED_IMAGE_TYPE, DEPTH_ENCODINGS, IMAGE_TYPE

__all__ = [
    "COLOR_ENCODINGS",
    "COMPRESSED_IMAGE_TYPE",
    "DEPTH_ENCODINGS",
    "IMAGE_TYPE",
    "decode_color",
    "decode_depth",
    "encode_image",
    "image_problem",
]

UInt8Image = npt.NDArray[np.uint8]
FloatImage = npt.NDArray[np.float32]


def decode_color(msg: Any, msgtype: str, max_pixels: int | None = None) -> UInt8Image:
    """An 8-bit colour or mono image message (or a compressed one) as an (H, W, 3) RGB uint8 array.

    `max_pixels`: a compressed image whose header declares more pixels is refused without being decoded."""
    encoding = "" if msgtype == COMPRESSED_IMAGE_TYPE else str(msg.encoding)
    if encoding in DEPTH_ENCODINGS:
        raise MessageMismatchError(
            f"{encoding} is a depth encoding and cannot be stored as a colour video/image feature; "
            "declare the feature with `dtype: depth` to store it as a float32 array in metres"
        )
    if encoding and encoding not in COLOR_ENCODINGS:
        raise MessageMismatchError(
            f"unsupported image encoding {encoding!r}; supported: {', '.join(COLOR_ENCODINGS)} (and depth "
            f"{', '.join(DEPTH_ENCODINGS)} with `dtype: depth`)"
        )
    try:
        rgb: UInt8Image = (
            images.decode_compressed(msg, max_pixels) if msgtype == COMPRESSED_IMAGE_TYPE else images.image_to_rgb(msg)
        )
    except images.ImageConversionError as err:
        raise MessageMismatchError(str(err)) from None
    return rgb


def image_problem(msg: Any, msgtype: str, shape: tuple[int, ...], depth: bool) -> str | None:
    """Why an image message cannot give a picture of `shape` ((H, W, 3) colour, (H, W) depth), found without
    decoding it (None when it can be decoded): an encoding the feature does not take, another size (a
    compressed image's size is read from its PNG/JPEG header, so a small file declaring a huge image is refused
    before any decoding), an empty image, rows shorter than the encoding needs or data shorter than the rows."""
    height, width = shape[0], shape[1]
    declared = f"the contract declares shape {list(shape)}"
    if msgtype == COMPRESSED_IMAGE_TYPE:
        size = images.compressed_dimensions(msg)
        if size is None:
            return "compressed image is not a JPEG or PNG, or its header is damaged"
        if size != (height, width):
            return f"compressed image is {size[1]}x{size[0]}, {declared}"
        return None
    encoding = str(msg.encoding)
    if not depth and encoding in DEPTH_ENCODINGS:
        return (
            f"{encoding} is a depth encoding and cannot be stored as a colour video/image feature; declare the "
            "feature with `dtype: depth` to store it as a float32 array in metres"
        )
    allowed = DEPTH_ENCODINGS if depth else COLOR_ENCODINGS
    if encoding not in allowed:
        return f"image encoding {encoding!r} is not one of {', '.join(allowed)}"
    rows, cols, step = int(msg.height), int(msg.width), int(msg.step)
    if (rows, cols) != (height, width):
        return f"image is {cols}x{rows}, {declared}"
    kind, channels = images.ENCODINGS[encoding]
    row = cols * channels * np.dtype(kind).itemsize
    if step < row:
        return f"image step {step} is shorter than a row of {cols} {encoding} pixels ({row} bytes)"
    if len(images.message_bytes(msg)) < step * rows:
        return f"image data is shorter than {rows} rows of {step} bytes"
    return None


def decode_depth(msg: Any, msgtype: str, scale_m: float) -> FloatImage:
    """A depth image (16UC1/mono16 in units of `scale_m` metres, or 32FC1 metres) as (H, W) float32 metres."""
    if msgtype != IMAGE_TYPE:
        raise MessageMismatchError(f"depth features need {IMAGE_TYPE}, got {msgtype}")
    encoding = str(msg.encoding)
    if encoding not in DEPTH_ENCODINGS:
        raise MessageMismatchError(f"depth feature got encoding {encoding!r}; use 16UC1, mono16 or 32FC1")
    try:
        depth = images.image_to_array(msg)
    except images.ImageConversionError as err:
        raise MessageMismatchError(str(err)) from None
    metres: FloatImage = depth.astype(np.float32, copy=False)
    if encoding != "32FC1":
        metres = (metres * np.float32(scale_m)).astype(np.float32)
    return metres


def encode_image(rgb: UInt8Image, encoding: str = "rgb8") -> tuple[int, int, str, int, npt.NDArray[np.uint8]]:
    """(height, width, encoding, step, data) for an Image message holding `rgb` (an (H, W, 3) uint8 array)."""
    if encoding == "mono8":
        # The recorder's synthetic sources store the red plane as mono (kept for their round-trip tests).
        fields = images.array_to_image(np.ascontiguousarray(rgb[:, :, 0]), "mono8")
    else:
        try:
            fields = images.rgb_to_image(rgb, encoding)
        except images.ImageConversionError as err:
            raise MessageMismatchError(str(err)) from None
    return fields.height, fields.width, fields.encoding, fields.step, fields.data
