"""A MotorBus on one pyserial port: the port's life, and every transaction through one `PacketLink`.

Both servo families (Feetech protocol 0, Dynamixel protocol 2.0) are this bus with their own packet module
(`ping`, `read`, `write`, `sync_read`, `sync_write`, `StreamDecoder`), the size of their status packet around
its data, how a decoded packet becomes a `Status`, and how a ping answers with the model number.
"""

from __future__ import annotations

import abc
import contextlib
import termios
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import serial

from lerobot_drivers.motors.bus import Motor, MotorBus, Reply
from lerobot_drivers.motors.errors import DisconnectedError
from lerobot_drivers.motors.link import PacketLink, Status, StreamDecoder


class PacketModule(Protocol):
    """What a family's protocol module provides (its functions build request packets)."""

    def ping(self, motor_id: int) -> bytes: ...
    def read(self, motor_id: int, address: int, length: int) -> bytes: ...
    def write(self, motor_id: int, address: int, data: bytes) -> bytes: ...
    def sync_read(self, motor_ids: Iterable[int], address: int, length: int) -> bytes: ...
    def sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> bytes: ...

    @property
    def StreamDecoder(self) -> type[StreamDecoder[Any]]: ...  # the module's class


class SerialMotorBus(MotorBus):
    """One serial port, its packets kept in step with their requests by `self.link`.

    `timeout_s` is the time allowed for a reply beyond its wire time; the OS and USB adapter latency go in it.
    """

    packets: ClassVar[PacketModule]
    status_overhead: ClassVar[int]  # bytes of a status packet besides its data

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
        self.link = PacketLink(port, self._port, self.packets.StreamDecoder, self.status_of, self.stats)

    @staticmethod
    @abc.abstractmethod
    def status_of(packet: Any) -> Status | None:
        """A decoded packet as a Status; None for one that is not a reply (an echoed request)."""

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

    def _port(self) -> serial.Serial:
        if self._serial is None:
            raise DisconnectedError(f"{self.port} is not open; call open() first")
        return self._serial

    def _transact(self, packet: bytes, expected: Sequence[int], data_length: int) -> dict[int, Reply]:
        """Send `packet`; one status of `data_length` data bytes from each id of `expected` (none: no reply)."""
        wire_bytes = len(packet) + (self.status_overhead + data_length) * len(expected)
        statuses = self.link.transact(packet, expected, data_length, self.timeout_s, wire_bytes * 10.0 / self.baudrate)
        return {motor_id: Reply(s.data, s.error) for motor_id, s in statuses.items()}

    def _read(self, motor_id: int, address: int, length: int) -> Reply:
        return self._transact(self.packets.read(motor_id, address, length), [motor_id], length)[motor_id]

    def _write(self, motor_id: int, address: int, data: bytes) -> int:
        return self._transact(self.packets.write(motor_id, address, data), [motor_id], 0)[motor_id].error

    def _sync_read(self, motor_ids: Sequence[int], address: int, length: int) -> dict[int, Reply]:
        return self._transact(self.packets.sync_read(motor_ids, address, length), list(motor_ids), length)

    def _sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        self._transact(self.packets.sync_write(address, length, data), [], 0)
