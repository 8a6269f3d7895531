"""Feetech protocol 0 packets: `FF FF ID LEN INSTR PARAMS... CHK`, checksum `~(ID+LEN+INSTR+PARAMS) & 0xFF`.

Instruction and status packets have the same layout; in a status packet the INSTR byte is the error byte.
LEN counts INSTR/ERROR + PARAMS + CHK. Pure functions, used by the bus, the fake servos and the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lerobot_drivers.motors.errors import CorruptReplyError
from lerobot_drivers.motors.feetech.tables import BROADCAST_ID, PING, READ, SYNC_READ, SYNC_WRITE, WRITE

HEADER = b"\xff\xff"
MAX_PACKET_PARAMS = 250


def checksum(body: bytes) -> int:
    """Checksum over ID, LEN, INSTR/ERROR and parameters."""
    return ~sum(body) & 0xFF


@dataclass(frozen=True)
class Packet:
    """A decoded packet: `code` is the instruction (requests) or the error byte (status replies)."""

    motor_id: int
    code: int
    params: bytes


def encode(motor_id: int, code: int, params: bytes = b"") -> bytes:
    """Encode one packet."""
    if not 0 <= motor_id <= 0xFE:
        raise ValueError(f"motor id {motor_id} is outside 0..254")
    if len(params) > MAX_PACKET_PARAMS:
        raise ValueError(f"{len(params)} parameter bytes do not fit one packet (max {MAX_PACKET_PARAMS})")
    body = bytes((motor_id, len(params) + 2, code)) + params
    return HEADER + body + bytes((checksum(body),))


def decode(packet: bytes) -> Packet:
    """Decode one complete packet; raises CorruptReplyError on a bad header, length or checksum."""
    if len(packet) < 6 or packet[:2] != HEADER:
        raise CorruptReplyError(f"not a Feetech packet: {packet.hex(' ')}")
    length = packet[3]
    if len(packet) != length + 4:
        raise CorruptReplyError(
            f"packet length byte says {length} but {len(packet) - 4} bytes follow: {packet.hex(' ')}"
        )
    body = packet[2:-1]
    if checksum(body) != packet[-1]:
        raise CorruptReplyError(f"checksum 0x{packet[-1]:02x} != 0x{checksum(body):02x} in {packet.hex(' ')}")
    return Packet(motor_id=packet[2], code=packet[4], params=bytes(packet[5:-1]))


def ping(motor_id: int) -> bytes:
    return encode(motor_id, PING)


def read(motor_id: int, address: int, length: int) -> bytes:
    return encode(motor_id, READ, bytes((address, length)))


def write(motor_id: int, address: int, data: bytes) -> bytes:
    return encode(motor_id, WRITE, bytes((address,)) + data)


def sync_read(motor_ids: Iterable[int], address: int, length: int) -> bytes:
    """SYNC READ: one broadcast request, each listed motor answers with its own status packet, in list order."""
    return encode(BROADCAST_ID, SYNC_READ, bytes((address, length, *motor_ids)))


def sync_write(address: int, length: int, data: Mapping[int, bytes]) -> bytes:
    """SYNC WRITE: one broadcast packet carrying `length` bytes per motor; nobody answers."""
    params = bytearray((address, length))
    for motor_id, chunk in data.items():
        if len(chunk) != length:
            raise ValueError(f"sync write to id {motor_id}: {len(chunk)} bytes given, {length} expected")
        params.append(motor_id)
        params += chunk
    return encode(BROADCAST_ID, SYNC_WRITE, bytes(params))


class StreamDecoder:
    """Splits a byte stream into packets, skipping garbage until the next `FF FF` header.

    Packets with a bad checksum are returned as `CorruptReplyError` instances so the caller can count them.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Packet | CorruptReplyError]:
        self._buffer += data
        out: list[Packet | CorruptReplyError] = []
        while True:
            start = self._buffer.find(HEADER)
            if start < 0:
                del self._buffer[: max(0, len(self._buffer) - 1)]
                return out
            del self._buffer[:start]
            # Tolerate extra 0xFF before the id (some adapters and servos send FF FF FF).
            while len(self._buffer) > 2 and self._buffer[2] == 0xFF:
                del self._buffer[0]
            if len(self._buffer) < 4:
                return out
            total = self._buffer[3] + 4
            if self._buffer[3] < 2:
                del self._buffer[:2]
                continue
            if len(self._buffer) < total:
                return out
            raw = bytes(self._buffer[:total])
            del self._buffer[:total]
            try:
                out.append(decode(raw))
            except CorruptReplyError as err:
                out.append(err)
