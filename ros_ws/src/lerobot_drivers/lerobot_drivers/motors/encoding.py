"""Signed register encodings used by the servos, and little-endian packing.

Feetech STS servos store signed values as sign-magnitude with the sign in a model-specific bit
(bit 15 for positions and speeds, bit 11 for the homing offset, bit 10 for the load); Dynamixel
X-series servos use two's complement over the register width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    """Encode `value` with its magnitude in the bits below `sign_bit` and the sign in `sign_bit`."""
    limit = (1 << sign_bit) - 1
    magnitude = abs(value)
    if magnitude > limit:
        raise ValueError(f"{value} does not fit a sign-magnitude field with the sign in bit {sign_bit} (max ±{limit})")
    return magnitude | (1 << sign_bit) if value < 0 else magnitude


def decode_sign_magnitude(raw: int, sign_bit: int) -> int:
    """Inverse of `encode_sign_magnitude`; bits above `sign_bit` are ignored."""
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw & (1 << sign_bit) else magnitude


def encode_twos_complement(value: int, n_bytes: int) -> int:
    """Encode a signed integer as an unsigned `n_bytes`-wide two's complement value."""
    bits = 8 * n_bytes
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f"{value} does not fit a signed {n_bytes}-byte register")
    return value & ((1 << bits) - 1)


def decode_twos_complement(raw: int, n_bytes: int) -> int:
    """Inverse of `encode_twos_complement`."""
    bits = 8 * n_bytes
    return raw - (1 << bits) if raw & (1 << (bits - 1)) else raw


@dataclass(frozen=True)
class SignEncoding:
    """How one register stores negative numbers."""

    kind: Literal["sign_magnitude", "twos_complement"]
    sign_bit: int = 15

    def encode(self, value: int, n_bytes: int) -> int:
        if self.kind == "sign_magnitude":
            return encode_sign_magnitude(value, self.sign_bit)
        return encode_twos_complement(value, n_bytes)

    def decode(self, raw: int, n_bytes: int) -> int:
        if self.kind == "sign_magnitude":
            return decode_sign_magnitude(raw, self.sign_bit)
        return decode_twos_complement(raw, n_bytes)


def to_le_bytes(value: int, n_bytes: int) -> bytes:
    """Unsigned little-endian bytes; raises ValueError when `value` does not fit."""
    if not 0 <= value < (1 << (8 * n_bytes)):
        raise ValueError(f"{value} does not fit an unsigned {n_bytes}-byte register")
    return value.to_bytes(n_bytes, "little")


def from_le_bytes(data: bytes) -> int:
    """Unsigned little-endian integer."""
    return int.from_bytes(data, "little")
