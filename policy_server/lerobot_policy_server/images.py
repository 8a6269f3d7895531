"""Camera images compressed for the wire: JPEG or PNG in Predict requests, decoded by the server (bounded).

A raw 320x240 RGB image is 230 kB; at a few Mbit/s that is most of a chunk's period on the wire. The client
(`compress_observation`) sends each camera image ((H, W, 3) uint8, as `FeatureSpec` defines a camera) as JPEG
or PNG bytes instead; the server (`decode_images`) turns them back into (H, W, 3) uint8 arrays, and the decoded
image is what the policy sees.

Decoding is bounded before a byte is decompressed: the width and height the JPEG frame header (SOF) or the PNG
IHDR chunk declares are read here, in Python, and must equal the policy's input shape, and the compressed bytes
may not be larger than the raw image would be. A decompression bomb (a few kB declaring 100000 x 100000 pixels)
is a `ProtocolError` (INVALID_ARGUMENT), never an allocation. OpenCV (`cv2`, in LeRobot's environment and this
project's) encodes and decodes; it is imported on first use, so the protocol itself stays numpy-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_policy_server.protocol import (
    COMPRESSED,
    IMAGE_ENCODINGS,
    JPEG,
    PNG,
    RAW,
    EncodedImage,
    ErrorCode,
    FeatureSpec,
    ProtocolError,
)

DEFAULT_JPEG_QUALITY = 90
PNG_COMPRESSION = 3  # zlib level: 9 is a few % smaller for several times the CPU
# Compressed bytes beyond the raw image's size (headers, tables) still accepted; beyond that send raw.
SLACK_BYTES = 64 * 1024
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Start-of-frame markers (baseline, extended, progressive, lossless; Huffman and arithmetic); not C4/C8/CC.
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8)})


def check_encoding(encoding: str, jpeg_quality: int = DEFAULT_JPEG_QUALITY) -> None:
    """ValueError naming the option when `encoding` is not one of IMAGE_ENCODINGS or the quality not 1..100."""
    if encoding not in IMAGE_ENCODINGS:
        raise ValueError(f"image encoding {encoding!r}: expected one of {', '.join(IMAGE_ENCODINGS)}")
    if not 1 <= int(jpeg_quality) <= 100:
        raise ValueError(f"JPEG quality {jpeg_quality}: expected 1..100")


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as err:
        raise ProtocolError(
            f"JPEG/PNG images need OpenCV here ({err}); install opencv-python-headless or send raw images",
            ErrorCode.FAILED_PRECONDITION,
        ) from None
    return cv2


def decodable() -> tuple[str, ...]:
    """The encodings this process can decode: all of IMAGE_ENCODINGS with OpenCV, else raw only."""
    try:
        _cv2()
    except ProtocolError:
        return (RAW,)
    return IMAGE_ENCODINGS


def is_camera_image(value: npt.NDArray[Any]) -> bool:
    """Whether `value` is a camera image as the protocol sends it: (H, W, 3) uint8."""
    return value.dtype == np.uint8 and value.ndim == 3 and value.shape[2] == 3


def encode_image(rgb: npt.NDArray[np.uint8], encoding: str, jpeg_quality: int = DEFAULT_JPEG_QUALITY) -> bytes:
    """JPEG (of `jpeg_quality`) or PNG bytes of an (H, W, 3) RGB uint8 image."""
    check_encoding(encoding, jpeg_quality)
    if encoding not in COMPRESSED:
        raise ValueError(f"encode_image makes {' or '.join(COMPRESSED)}, not {encoding!r}")
    if not is_camera_image(rgb):
        raise ValueError(f"a camera image is (H, W, 3) uint8, got {rgb.dtype} {tuple(rgb.shape)}")
    cv2 = _cv2()
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    if encoding == JPEG:
        ok, buf = cv2.imencode(".jpg", bgr, [int(cv2.IMWRITE_JPEG_QUALITY), int(jpeg_quality)])
    else:
        ok, buf = cv2.imencode(".png", bgr, [int(cv2.IMWRITE_PNG_COMPRESSION), PNG_COMPRESSION])
    if not ok:
        raise ValueError(f"OpenCV could not encode a {tuple(rgb.shape)} image as {encoding}")
    return bytes(buf.tobytes())


def compress_observation(
    observation: Mapping[str, npt.NDArray[Any]], encoding: str, jpeg_quality: int = DEFAULT_JPEG_QUALITY
) -> tuple[dict[str, npt.NDArray[Any]], dict[str, EncodedImage]]:
    """(arrays sent as they are, camera images as `encoding`); with raw, every value stays an array."""
    check_encoding(encoding, jpeg_quality)
    arrays: dict[str, npt.NDArray[Any]] = {}
    images: dict[str, EncodedImage] = {}
    for key, value in observation.items():
        array = np.asarray(value)
        if encoding in COMPRESSED and is_camera_image(array):
            images[key] = EncodedImage(encoding, encode_image(array, encoding, jpeg_quality))
        else:
            arrays[key] = array
    return arrays, images


def _jpeg_size(data: bytes) -> tuple[int, int]:
    """(height, width) from a JPEG's frame header; ProtocolError when there is none before the image data."""
    if data[:2] != b"\xff\xd8":
        raise ProtocolError("not a JPEG (no SOI marker)")
    i, end = 2, len(data)
    while i < end:
        if data[i] != 0xFF:
            raise ProtocolError(f"JPEG: no marker at byte {i}")
        while i < end and data[i] == 0xFF:  # fill bytes
            i += 1
        if i >= end:
            break
        marker = data[i]
        i += 1
        if marker in _STANDALONE_MARKERS:
            continue
        if marker in (0xD9, 0xDA):  # end of image, or scan data, before any frame header
            break
        if i + 2 > end:
            break
        length = int.from_bytes(data[i : i + 2], "big")
        if length < 2:
            raise ProtocolError(f"JPEG: segment length {length} at byte {i}")
        if marker in _SOF_MARKERS:
            if length < 8 or i + 7 > end:
                break
            return int.from_bytes(data[i + 3 : i + 5], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
        i += length
    raise ProtocolError("JPEG: no frame header (SOF) before the image data")


def _png_size(data: bytes) -> tuple[int, int]:
    """(height, width) from a PNG's IHDR chunk (which must come first)."""
    if data[:8] != _PNG_SIGNATURE:
        raise ProtocolError("not a PNG (bad signature)")
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise ProtocolError("PNG: the first chunk is not IHDR")
    return int.from_bytes(data[20:24], "big"), int.from_bytes(data[16:20], "big")


def declared_size(encoding: str, data: bytes) -> tuple[int, int]:
    """(height, width) the compressed image says it has, read from its header without decoding it."""
    if encoding == JPEG:
        return _jpeg_size(data)
    if encoding == PNG:
        return _png_size(data)
    raise ProtocolError(f"image encoding {encoding!r} is not one of {', '.join(COMPRESSED)}")


def decode_image(spec: FeatureSpec, image: EncodedImage) -> npt.NDArray[np.uint8]:
    """The (H, W, 3) RGB uint8 image of camera `spec`; ProtocolError (INVALID_ARGUMENT) when its declared size is
    not the policy's, its bytes exceed the raw size, or it does not decode; nothing is decoded before the checks."""
    if not spec.visual or len(spec.shape) != 3 or spec.dtype != "uint8":
        raise ProtocolError(f"observation {spec.key!r} is not a camera image; send it as an array")
    height, width, channels = spec.shape
    raw_bytes = height * width * channels
    if len(image.data) > raw_bytes + SLACK_BYTES:
        raise ProtocolError(
            f"observation {spec.key!r}: {len(image.data)} bytes of {image.encoding} exceed the raw image's "
            f"{raw_bytes}; send it raw"
        )
    declared = declared_size(image.encoding, image.data)
    if declared != (height, width):
        raise ProtocolError(
            f"observation {spec.key!r}: the {image.encoding} declares {declared[1]}x{declared[0]} pixels, the policy "
            f"needs {width}x{height}; not decoded"
        )
    cv2 = _cv2()
    flags = int(cv2.IMREAD_COLOR) | int(cv2.IMREAD_IGNORE_ORIENTATION)
    try:
        bgr = cv2.imdecode(np.frombuffer(image.data, dtype=np.uint8), flags)
    except cv2.error as err:  # OpenCV's own limits and codec failures
        raise ProtocolError(f"observation {spec.key!r}: the {image.encoding} bytes do not decode ({err})") from None
    if bgr is None:
        raise ProtocolError(f"observation {spec.key!r}: the {image.encoding} bytes do not decode")
    rgb = np.ascontiguousarray(bgr[:, :, ::-1])
    spec.check(rgb)
    return rgb


def decode_images(
    inputs: Sequence[FeatureSpec], observation: Mapping[str, npt.NDArray[Any]], images: Mapping[str, EncodedImage]
) -> dict[str, npt.NDArray[Any]]:
    """`observation` with every compressed image decoded; ProtocolError naming an image the policy does not take."""
    specs = {spec.key: spec for spec in inputs}
    out = dict(observation)
    for key, image in images.items():
        spec = specs.get(key)
        if spec is None:
            raise ProtocolError(f"observation has an image {key!r} the policy does not take ({sorted(specs)})")
        out[key] = decode_image(spec, image)
    return out
