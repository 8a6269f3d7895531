"""Feetech STS/SMS bus (protocol 0) written directly on pyserial."""

from __future__ import annotations

import contextlib
import termios
import time
from collections.abc import Mapping, Sequence
from typing import ClassVar

import serial

from lerobot_drivers.motors.bus import Motor, MotorBus, Reply
from lerobot_drivers.motors.errors import CorruptReplyError, DisconnectedError, NoReplyError
from lerobot_drivers.motors.feetech import protocol
from lerobot_drivers.motors.feetech.tables import MODELS, describe_status
from lerobot_drivers.motors.tables import ModelInfo

STATUS_OVERHEAD = 6  # FF FF ID LEN ERR ... CHK


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

    def _send(self, packet: bytes) -> None:
        port = self._port()
        try:
            port.reset_input_buffer()
            port.write(packet)
        except (serial.SerialException, OSError, termios.error) as err:
            raise DisconnectedError(f"{self.port}: write failed ({err}); is the adapter still plugged in?") from None

    def _receive(self, expected: Sequence[int], data_length: int, sent: int) -> dict[int, Reply]:
        """Collect one status packet of `data_length` data bytes from each id of `expected`."""
        port = self._port()
        reply_size = STATUS_OVERHEAD + data_length
        total = reply_size * len(expected)
        deadline = time.monotonic() + self.timeout_s + self._wire_time(sent + total)
        decoder = protocol.StreamDecoder()
        replies: dict[int, Reply] = {}
        corrupt: list[str] = []
        wanted = set(expected)
        received = 0
        while len(replies) + len(corrupt) < len(expected):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                port.timeout = remaining  # reconfigures the port: fails too when the device is gone
                chunk = port.read(max(1, total - received))
            except (serial.SerialException, OSError, termios.error) as err:
                raise DisconnectedError(f"{self.port}: read failed ({err}); is the adapter still plugged in?") from None
            received += len(chunk)
            for item in decoder.feed(chunk):
                if isinstance(item, CorruptReplyError):
                    corrupt.append(str(item))
                    continue
                if item.motor_id not in wanted or item.motor_id in replies:
                    continue
                if len(item.params) != data_length:
                    corrupt.append(f"id {item.motor_id} sent {len(item.params)} data bytes, expected {data_length}")
                    continue
                replies[item.motor_id] = Reply(item.params, item.code)
        if corrupt:
            raise CorruptReplyError("; ".join(corrupt))
        missing = tuple(i for i in expected if i not in replies)
        if missing:
            raise NoReplyError(f"no reply from id(s) {', '.join(map(str, missing))} within the timeout", missing)
        return replies

    def _ping(self, motor_id: int) -> int:
        self._send(protocol.ping(motor_id))
        self._receive([motor_id], 0, 6)
        reply = self._read(motor_id, self.models["sts3215"].register("Model_Number").address, 2)
        return int.from_bytes(reply.data, "little")

    def _read(self, motor_id: int, address: int, length: int) -> Reply:
        packet = protocol.read(motor_id, address, length)
        self._send(packet)
        return self._receive([motor_id], length, len(packet))[motor_id]

    def _write(self, motor_id: int, address: int, data: bytes) -> int:
        packet = protocol.write(motor_id, address, data)
        self._send(packet)
        return self._receive([motor_id], 0, len(packet))[motor_id].error

    def _sync_read(self, motor_ids: Sequence[int], address: int, length: int) -> dict[int, Reply]:
        packet = protocol.sync_read(motor_ids, address, length)
        self._send(packet)
        return self._receive(motor_ids, length, len(packet))

    def _sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        self._send(protocol.sync_write(address, length, data))
