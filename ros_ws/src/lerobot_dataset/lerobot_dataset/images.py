"""PNG encoding of `image` features (HF datasets' Image cell: struct<bytes, path>)."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from lerobot_dataset.errors import DatasetFormatError

PNG_COMPRESSION = 3


def encode_png(frame: npt.NDArray[np.uint8]) -> bytes:
    """PNG bytes of an (H, W, 3) RGB uint8 frame."""
    ok, buf = cv2.imencode(
        ".png", cv2.cvtColor(frame, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, PNG_COMPRESSION]
    )
    if not ok:
        raise DatasetFormatError("PNG encoding failed")
    return bytes(buf.tobytes())


def decode_png(data: bytes) -> npt.NDArray[np.uint8]:
    """(H, W, 3) RGB uint8 frame from PNG (or any image format OpenCV reads) bytes."""
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise DatasetFormatError("an image cell does not hold a decodable image")
    return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), dtype=np.uint8)
