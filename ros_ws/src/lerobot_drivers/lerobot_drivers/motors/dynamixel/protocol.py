"""Dynamixel protocol 2.0 packets: `FF FF FD 00 ID LEN_L LEN_H INSTR PARAMS... CRC_L CRC_H`.

LEN counts INSTR + (stuffed) PARAMS + CRC. Any `FF FF FD` inside INSTR..PARAMS is stuffed to
`FF FF FD FD`. The CRC is CRC-16/BUYPASS (polynomial 0x8005, no reflection, init 0) over everything
before it, header included. A status packet has INSTR 0x55 followed by the error byte.

The bus (`bus.py`), the fake servos and the tests use it; it also
documents the wire format the bench's wire-time figures are computed from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lerobot_drivers.motors.dynamixel.tables import BROADCAST_ID, PING, READ, STATUS, SYNC_READ, SYNC_WRITE, WRITE
from lerobot_drivers.motors.errors import CorruptReplyError

HEADER = b"\xff\xff\xfd\x00"


def _crc_table() -> tuple[int, ...]:
    entries = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        entries.append(crc & 0xFFFF)
    return tuple(entries)


_CRC_TABLE = _crc_table()


def crc16(data: bytes) -> int:
    """CRC-16 of protocol 2.0 (polynomial 0x8005, init 0, not reflected)."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) ^ _CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]) & 0xFFFF
    return crc


def stuff(data: bytes) -> bytes:
    """Insert 0xFD after every `FF FF FD` so a header never appears inside a packet."""
    out = bytearray()
    for byte in data:
        out.append(byte)
        if byte == 0xFD and len(out) >= 3 and out[-3:-1] == b"\xff\xff":
            out.append(0xFD)
    return bytes(out)


def unstuff(data: bytes) -> bytes:
    """Remove the 0xFD inserted by `stuff`."""
    out = bytearray()
    i = 0
    while i < len(data):
        out.append(data[i])
        if data[i] == 0xFD and i >= 2 and data[i - 2 : i] == b"\xff\xff" and i + 1 < len(data) and data[i + 1] == 0xFD:
            i += 1
        i += 1
    return bytes(out)


@dataclass(frozen=True)
class Packet:
    """A decoded packet. For a status packet `instruction` is 0x55 and `error` holds the error byte."""

    motor_id: int
    instruction: int
    params: bytes
    error: int = 0


def encode(motor_id: int, instruction: int, params: bytes = b"") -> bytes:
    """Encode an instruction packet (or, with instruction STATUS and the error byte first in params, a status)."""
    if not 0 <= motor_id <= 0xFE:
        raise ValueError(f"motor id {motor_id} is outside 0..254")
    payload = stuff(bytes((instruction,)) + params)
    length = len(payload) + 2
    head = HEADER + bytes((motor_id, length & 0xFF, length >> 8)) + payload
    crc = crc16(head)
    return head + bytes((crc & 0xFF, crc >> 8))


def encode_status(motor_id: int, error: int, params: bytes = b"") -> bytes:
    """Encode a status packet."""
    return encode(motor_id, STATUS, bytes((error,)) + params)


def decode(packet: bytes) -> Packet:
    """Decode one complete packet; raises CorruptReplyError on a bad header, length or CRC."""
    if len(packet) < 10 or packet[:4] != HEADER:
        raise CorruptReplyError(f"not a Dynamixel 2.0 packet: {packet.hex(' ')}")
    length = packet[5] | (packet[6] << 8)
    if len(packet) != length + 7:
        raise CorruptReplyError(f"length field says {length} but {len(packet) - 7} bytes follow: {packet.hex(' ')}")
    crc = packet[-2] | (packet[-1] << 8)
    if crc16(packet[:-2]) != crc:
        raise CorruptReplyError(f"CRC 0x{crc:04x} != 0x{crc16(packet[:-2]):04x} in {packet.hex(' ')}")
    payload = unstuff(packet[7:-2])
    instruction = payload[0]
    if instruction == STATUS:
        if len(payload) < 2:
            raise CorruptReplyError(f"status packet without error byte: {packet.hex(' ')}")
        return Packet(motor_id=packet[4], instruction=instruction, params=bytes(payload[2:]), error=payload[1])
    return Packet(motor_id=packet[4], instruction=instruction, params=bytes(payload[1:]))


def ping(motor_id: int) -> bytes:
    return encode(motor_id, PING)


def read(motor_id: int, address: int, length: int) -> bytes:
    return encode(motor_id, READ, address.to_bytes(2, "little") + length.to_bytes(2, "little"))


def write(motor_id: int, address: int, data: bytes) -> bytes:
    return encode(motor_id, WRITE, address.to_bytes(2, "little") + data)


def sync_read(motor_ids: Iterable[int], address: int, length: int) -> bytes:
    return encode(
        BROADCAST_ID, SYNC_READ, address.to_bytes(2, "little") + length.to_bytes(2, "little") + bytes(motor_ids)
    )


def sync_write(address: int, length: int, data: Mapping[int, bytes]) -> bytes:
    params = bytearray(address.to_bytes(2, "little") + length.to_bytes(2, "little"))
    for motor_id, chunk in data.items():
        if len(chunk) != length:
            raise ValueError(f"sync write to id {motor_id}: {len(chunk)} bytes given, {length} expected")
        params.append(motor_id)
        params += chunk
    return encode(BROADCAST_ID, SYNC_WRITE, bytes(params))


class StreamDecoder:
    """Splits a byte stream into packets; damaged packets come out as `CorruptReplyError` instances."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Packet | CorruptReplyError]:
        self._buffer += data
        out: list[Packet | CorruptReplyError] = []
        while True:
            start = self._buffer.find(HEADER)
            if start < 0:
                del self._buffer[: max(0, len(self._buffer) - 3)]
                return out
            del self._buffer[:start]
            if len(self._buffer) < 7:
                return out
            total = (self._buffer[5] | (self._buffer[6] << 8)) + 7
            if total < 10:
                del self._buffer[:4]
                continue
            if len(self._buffer) < total:
                return out
            raw = bytes(self._buffer[:total])
            del self._buffer[:total]
            try:
                out.append(decode(raw))
            except CorruptReplyError as err:
                out.append(err)
