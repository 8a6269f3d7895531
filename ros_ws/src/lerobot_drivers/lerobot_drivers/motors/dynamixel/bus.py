"""Dynamixel protocol 2.0 bus on dynamixel-sdk (PortHandler / PacketHandler).

Sync reads use the SDK's SYNC READ transmit and per-id receive so that each motor's status error byte
(hardware alert) is kept; the SDK's GroupSyncRead drops it.
"""

from __future__ import annotations

import contextlib
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import dynamixel_sdk as dxl
import serial

from lerobot_drivers.motors.bus import Motor, MotorBus, Reply
from lerobot_drivers.motors.dynamixel.tables import MODELS, describe_status
from lerobot_drivers.motors.errors import (
    BusCommunicationError,
    CorruptReplyError,
    DisconnectedError,
    NoReplyError,
)
from lerobot_drivers.motors.tables import ModelInfo

PROTOCOL_VERSION = 2.0


# The SDK opens the port with timeout=0 and spins on it while waiting for a reply, which burns a core
# and starves other Python threads of the GIL; a short blocking read waits in select() instead.
READ_POLL_S = 0.002
# What the SDK allows a reply beyond its wire time (`PortHandler.setPacketTimeout`: 2 x LATENCY_TIMER + 2 ms).
_SDK_SLACK_MS = 2 * dxl.port_handler.LATENCY_TIMER + 2.0


class _MonotonicPortHandler(dxl.PortHandler):  # type: ignore[misc]
    """The SDK times replies with the wall clock (`time.time()`); a clock step makes replies time out.
    It also allows a reply only its wire time plus 34 ms, whatever the bus's `timeout_s` says.

    Same interface, monotonic clock (milliseconds, as the SDK expects), and a reply gets at least `timeout_s()`
    beyond its wire time (the bus's timeout, raised while the arm is set up: `MotorBus.patient`).
    """

    def __init__(self, port_name: str, timeout_s: Callable[[], float]) -> None:
        super().__init__(port_name)
        self._timeout_s = timeout_s

    def getCurrentTime(self) -> float:
        return time.monotonic() * 1000.0

    def setPacketTimeout(self, packet_length: int) -> None:
        wire_ms = self.tx_time_per_byte * packet_length
        self.setPacketTimeoutMillis(wire_ms + max(_SDK_SLACK_MS, self._timeout_s() * 1000.0))


class DynamixelBus(MotorBus):
    """Dynamixel X-series servos on one serial port (U2D2 or compatible)."""

    family: ClassVar[str] = "dynamixel"
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
        self._port_handler: Any = None
        self._packets: Any = dxl.PacketHandler(PROTOCOL_VERSION)

    @property
    def is_open(self) -> bool:
        return self._port_handler is not None and bool(self._port_handler.is_open)

    def open(self) -> None:
        if self.is_open:
            return
        handler = _MonotonicPortHandler(self.port, lambda: self.timeout_s)
        handler.baudrate = self.baudrate
        try:
            handler.setupPort(self.baudrate)
            handler.ser.timeout = READ_POLL_S
        except (serial.SerialException, OSError, ValueError) as err:
            raise self.open_error(err) from None
        self._port_handler = handler

    def close(self) -> None:
        if self._port_handler is not None:
            # A device that is gone already has nothing left to release.
            with contextlib.suppress(serial.SerialException, OSError, termios.error):
                self._port_handler.closePort()
            self._port_handler = None

    def set_baudrate(self, baudrate: int) -> None:
        self.baudrate = baudrate
        if self._port_handler is not None:
            try:
                self._port_handler.baudrate = baudrate
                self._port_handler.ser.baudrate = baudrate
                self._port_handler.tx_time_per_byte = (1000.0 / baudrate) * 10.0
            except (serial.SerialException, OSError, termios.error) as err:
                raise DisconnectedError(f"{self.port}: cannot set {baudrate} baud: {err}") from None

    def describe_status(self, error: int) -> str:
        return describe_status(error)

    def _handler(self) -> Any:
        if self._port_handler is None:
            raise DisconnectedError(f"{self.port} is not open; call open() first")
        return self._port_handler

    def _call(self, what: str, function: Any, *args: Any) -> Any:
        try:
            return function(self._handler(), *args)
        except (serial.SerialException, OSError, termios.error) as err:
            raise DisconnectedError(f"{self.port}: {what} failed ({err}); is the adapter still plugged in?") from None

    def _check(self, result: int, what: str, motor_ids: tuple[int, ...] = ()) -> None:
        if result == dxl.COMM_SUCCESS:
            return
        text = f"{what}: {self._packets.getTxRxResult(result)}"
        if result == dxl.COMM_RX_TIMEOUT:
            raise NoReplyError(text, motor_ids)
        if result == dxl.COMM_RX_CORRUPT:
            raise CorruptReplyError(text)
        if result == dxl.COMM_TX_FAIL:
            raise DisconnectedError(text)
        raise BusCommunicationError(text)

    def _ping(self, motor_id: int) -> int:
        model, result, _error = self._call("ping", self._packets.ping, motor_id)
        self._check(result, f"ping id {motor_id}", (motor_id,))
        return int(model)

    def _read(self, motor_id: int, address: int, length: int) -> Reply:
        data, result, error = self._call("read", self._packets.readTxRx, motor_id, address, length)
        self._check(result, f"read id {motor_id}", (motor_id,))
        return Reply(bytes(data), int(error))

    def _write(self, motor_id: int, address: int, data: bytes) -> int:
        result, error = self._call("write", self._packets.writeTxRx, motor_id, address, len(data), list(data))
        self._check(result, f"write id {motor_id}", (motor_id,))
        return int(error)

    def _sync_read(self, motor_ids: Sequence[int], address: int, length: int) -> dict[int, Reply]:
        ids = list(motor_ids)
        self._call("sync read", lambda handler: handler.ser.reset_input_buffer())  # drop late replies
        result = self._call("sync read", self._packets.syncReadTx, address, length, ids, len(ids), False)
        self._check(result, "sync read request")
        replies = {}
        for motor_id in ids:
            data, result, error = self._call("sync read", self._packets.readRx, motor_id, length)
            self._check(result, f"sync read reply of id {motor_id}", (motor_id,))
            replies[motor_id] = Reply(bytes(data), int(error))
        return replies

    def _sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        params: list[int] = []
        for motor_id, chunk in data.items():
            params.append(motor_id)
            params.extend(chunk)
        result = self._call("sync write", self._packets.syncWriteTxOnly, address, length, params, len(params))
        self._check(result, "sync write")
