"""Feetech STS/SMS bus (protocol 0) written directly on pyserial."""

from __future__ import annotations

import contextlib
import termios
from collections.abc import Mapping, Sequence
from typing import ClassVar

import serial

from lerobot_drivers.motors.bus import Motor, MotorBus, Reply
from lerobot_drivers.motors.errors import DisconnectedError
from lerobot_drivers.motors.feetech import protocol
from lerobot_drivers.motors.feetech.tables import MODELS, describe_status
from lerobot_drivers.motors.link import PacketLink, Status
from lerobot_drivers.motors.tables import ModelInfo

STATUS_OVERHEAD = 6  # FF FF ID LEN ERR ... CHK


def _status(packet: protocol.Packet) -> Status:
    return Status(packet.motor_id, packet.code, packet.params)


class FeetechBus(MotorBus):
    """Feetech servos (STS3215) on one serial port.

    `timeout_s` is the time allowed for a reply beyond its wire time; the OS and USB adapter latency go in it.
    """

    family: ClassVar[str] = "feetech"
    models: ClassVar[Mapping[str, ModelInfo]] = MODELS

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        *,
        baudrate: int = 1_000_000,
        timeout_s: float = 0.05,
        retries: int = 2,
    ) -> None:
        super().__init__(port, motors, baudrate=baudrate, timeout_s=timeout_s, retries=retries)
        self._serial: serial.Serial | None = None
        self.link = PacketLink(port, self._port, protocol.StreamDecoder, _status, self.stats)

    @property
    def is_open(self) -> bool:
        return self._serial is not None and self._serial.is_open

    def open(self) -> None:
        if self.is_open:
            return
        try:
            self._serial = serial.Serial(self.port, self.baudrate, timeout=self.timeout_s, write_timeout=1.0)
        except (serial.SerialException, OSError, ValueError) as err:
            raise self.open_error(err) from None

    def close(self) -> None:
        if self._serial is not None:
            # A device that is gone already has nothing left to release.
            with contextlib.suppress(serial.SerialException, OSError, termios.error):
                self._serial.close()
            self._serial = None

    def set_baudrate(self, baudrate: int) -> None:
        self.baudrate = baudrate
        if self._serial is not None:
            try:
                self._serial.baudrate = baudrate
            except (serial.SerialException, OSError, termios.error) as err:
                raise DisconnectedError(f"{self.port}: cannot set {baudrate} baud: {err}") from None

    def describe_status(self, error: int) -> str:
        return describe_status(error)

    def _port(self) -> serial.Serial:
        if self._serial is None:
            raise DisconnectedError(f"{self.port} is not open; call open() first")
        return self._serial

    def _wire_time(self, n_bytes: int) -> float:
        return n_bytes * 10.0 / self.baudrate

    def _transact(self, packet: bytes, expected: Sequence[int], data_length: int) -> dict[int, Reply]:
        """Send `packet`; one status of `data_length` data bytes from each id of `expected` (none: no reply)."""
        wire = self._wire_time(len(packet) + (STATUS_OVERHEAD + data_length) * len(expected))
        statuses = self.link.transact(packet, expected, data_length, self.timeout_s, wire)
        return {motor_id: Reply(s.data, s.error) for motor_id, s in statuses.items()}

    def _ping(self, motor_id: int) -> int:
        self._transact(protocol.ping(motor_id), [motor_id], 0)
        reply = self._read(motor_id, self.models["sts3215"].register("Model_Number").address, 2)
        return int.from_bytes(reply.data, "little")

    def _read(self, motor_id: int, address: int, length: int) -> Reply:
        return self._transact(protocol.read(motor_id, address, length), [motor_id], length)[motor_id]

    def _write(self, motor_id: int, address: int, data: bytes) -> int:
        return self._transact(protocol.write(motor_id, address, data), [motor_id], 0)[motor_id].error

    def _sync_read(self, motor_ids: Sequence[int], address: int, length: int) -> dict[int, Reply]:
        return self._transact(protocol.sync_read(motor_ids, address, length), motor_ids, length)

    def _sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        self._transact(protocol.sync_write(address, length, data), [], 0)
