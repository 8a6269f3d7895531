"""A synthetic test pattern that carries its frame counter and capture time in the pixels.

The top band of the image holds two rows of 32 black/white blocks: row 0 is the frame counter, row 1 the
capture time in milliseconds modulo 2**32 (both most significant bit first). Blocks are large enough to
survive JPEG compression and scaling, so a subscriber can decode order, drops and latency from the image
alone. Below the band a colour gradient moves with the counter so the image changes every frame.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

BITS = 32
MIN_WIDTH = BITS * 2
MIN_HEIGHT = 8

UInt8Image = npt.NDArray[np.uint8]


def _block(width: int, height: int) -> tuple[int, int]:
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        raise ValueError(f"the pattern needs at least {MIN_WIDTH}x{MIN_HEIGHT} pixels, got {width}x{height}")
    return width // BITS, max(2, min(16, height // 8))


def _bits(value: int) -> npt.NDArray[np.bool_]:
    value %= 2**BITS
    return np.array([(value >> (BITS - 1 - i)) & 1 for i in range(BITS)], dtype=bool)


def make_pattern(counter: int, time_ms: int, width: int, height: int) -> UInt8Image:
    """An (height, width, 3) RGB frame carrying `counter` and `time_ms` (each modulo 2**32)."""
    block_w, block_h = _block(width, height)
    ramp = (np.arange(width, dtype=np.uint32) + (counter * 4) % 256) % 256
    rows = np.arange(height, dtype=np.uint32)[:, None]
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:, :, 0] = ramp[None, :].astype(np.uint8)
    image[:, :, 1] = ((rows * 255) // max(1, height - 1)).astype(np.uint8)
    image[:, :, 2] = ((ramp[None, :] + rows + 128) % 256).astype(np.uint8)
    for row, value in enumerate((counter, time_ms)):
        levels = np.where(_bits(value), 255, 0).astype(np.uint8)
        band = np.repeat(levels, block_w)
        top = row * block_h
        image[top : top + block_h, : band.size, :] = band[None, :, None]
    return image


def read_pattern(image: UInt8Image) -> tuple[int, int]:
    """(counter, time_ms) decoded from a frame made by `make_pattern` (RGB or mono, possibly JPEG-compressed)."""
    height, width = int(image.shape[0]), int(image.shape[1])
    block_w, block_h = _block(width, height)
    gray = image if image.ndim == 2 else image.astype(np.uint16).sum(axis=2) // 3
    values = []
    for row in range(2):
        y = row * block_h + block_h // 2
        xs = np.arange(BITS) * block_w + block_w // 2
        bits = gray[y, xs] > 127
        values.append(int(sum(int(b) << (BITS - 1 - i) for i, b in enumerate(bits))))
    return values[0], values[1]
