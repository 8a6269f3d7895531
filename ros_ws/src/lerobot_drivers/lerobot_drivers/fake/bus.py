"""Simulated servo buses: protocol handling, fault injection, and the pseudo-terminal they are reached through."""

from __future__ import annotations

import abc
import array
import fcntl
import os
import random
import select
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from lerobot_drivers.fake.servo import Dynamics, FakeServo, Family
from lerobot_drivers.motors.dynamixel import protocol as dxl_protocol
from lerobot_drivers.motors.dynamixel import tables as dxl_tables
from lerobot_drivers.motors.errors import CorruptReplyError
from lerobot_drivers.motors.feetech import protocol as ft_protocol
from lerobot_drivers.motors.feetech import tables as ft_tables
from lerobot_drivers.motors.tables import ModelInfo

_TCGETS2 = 0x802C542A  # Linux ioctl: termios2 with the exact baud rate in c_ispeed/c_ospeed


def port_baudrate(fd: int) -> int | None:
    """Baud rate the client set on the pty (read through the master side), or None when it cannot be told."""
    buf = array.array("i", [0] * 64)
    try:
        fcntl.ioctl(fd, _TCGETS2, buf)
    except OSError:
        return None
    return int(buf[10])


@dataclass
class Faults:
    """Faults to inject. Counters are consumed one per reply; rates apply to every reply (seeded).

    `silent`: no servo answers (servo power lost, data line cut) while the port itself stays open.
    `reply_delay_s`: every reply goes out this late (a busy host, a slow USB adapter).
    `delay_next_s`: the next replies go out these many seconds late, one per request answered, before `reply_delay_s`
    applies again (a host busy for a while: a stack of nodes starting).
    `late_next`: per motor id, its next n replies each go out only when the following request has arrived (so
    late that the host gave up on it and sent its next request: the late reply then precedes that one's).
    """

    drop_next: int = 0
    corrupt_next: int = 0
    drop_rate: float = 0.0
    corrupt_rate: float = 0.0
    error_bits: dict[int, int] = field(default_factory=dict)
    silent: bool = False
    reply_delay_s: float = 0.0
    delay_next_s: list[float] = field(default_factory=list)
    late_next: dict[int, int] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("drop_rate", "corrupt_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within 0..1, got {getattr(self, name)}")
        self._random = random.Random(self.seed)

    def take_drop(self) -> bool:
        if self.drop_next > 0:
            self.drop_next -= 1
            return True
        return self.drop_rate > 0 and self._random.random() < self.drop_rate

    def take_corrupt(self) -> bool:
        if self.corrupt_next > 0:
            self.corrupt_next -= 1
            return True
        return self.corrupt_rate > 0 and self._random.random() < self.corrupt_rate

    def take_delay(self) -> float:
        return self.delay_next_s.pop(0) if self.delay_next_s else self.reply_delay_s

    def take_late(self, motor_id: int) -> bool:
        if self.late_next.get(motor_id, 0) > 0:
            self.late_next[motor_id] -= 1
            return True
        return False


@dataclass
class FaultCounters:
    """What the fake did, for tests to check that a fault was really injected."""

    requests: int = 0
    replies: int = 0
    dropped: int = 0
    corrupted: int = 0
    late: int = 0
    silenced: int = 0
    ignored_wrong_baud: int = 0
    damaged_requests: int = 0


class FakeServoBus(abc.ABC):
    """A set of servos answering protocol packets."""

    family: Family

    def __init__(self, servos: Iterable[FakeServo], baudrate: int) -> None:
        self.servos = {s.motor_id: s for s in servos}
        self.baudrate = baudrate
        self.faults = Faults()
        self.counters = FaultCounters()
        self.lock = threading.RLock()
        self.on_write: Callable[[int, int, bytes], None] | None = None
        self._held: list[bytes] = []  # late replies (Faults.late_next), sent when the next request arrives

    def _release_late(self) -> list[bytes]:
        held, self._held = self._held, []
        return held

    def servo(self, motor_id: int) -> FakeServo:
        return self.servos[motor_id]

    def _write(self, servo: FakeServo, address: int, data: bytes) -> None:
        servo.write(address, data)
        if self.on_write is not None:
            self.on_write(servo.motor_id, address, data)

    @abc.abstractmethod
    def feed(self, data: bytes) -> list[bytes]:
        """Bytes from the host; returns the reply packets to send back, in order."""

    @abc.abstractmethod
    def _status(self, motor_id: int, error: int, params: bytes) -> bytes:
        """Encode a status packet."""

    def _error_byte(self, servo: FakeServo) -> int:
        return self.faults.error_bits.get(servo.motor_id, 0)

    def _reply(self, servo: FakeServo, params: bytes) -> list[bytes]:
        self.counters.replies += 1
        if self.faults.silent:
            self.counters.silenced += 1
            return []
        if self.faults.take_drop():
            self.counters.dropped += 1
            return []
        packet = bytearray(self._status(servo.motor_id, self._error_byte(servo), params))
        if self.faults.take_corrupt():
            self.counters.corrupted += 1
            packet[-1] ^= 0x5A
        if self.faults.take_late(servo.motor_id):
            self.counters.late += 1
            self._held.append(bytes(packet))
            return []
        return [bytes(packet)]

    def set_error(self, motor_id: int, bits: int) -> None:
        """Make `motor_id` report `bits` in its status packets (0 clears)."""
        with self.lock:
            if bits:
                self.faults.error_bits[motor_id] = bits
            else:
                self.faults.error_bits.pop(motor_id, None)
            self._set_hardware_error(self.servos[motor_id], bits)

    def _set_hardware_error(self, servo: FakeServo, bits: int) -> None:
        servo.hardware_error = bits


class FeetechFakeBus(FakeServoBus):
    """Feetech STS servos speaking protocol 0."""

    family: Family = "feetech"

    def __init__(self, servos: Iterable[FakeServo], baudrate: int = 1_000_000) -> None:
        super().__init__(servos, baudrate)
        self._decoder = ft_protocol.StreamDecoder()

    def _status(self, motor_id: int, error: int, params: bytes) -> bytes:
        return ft_protocol.encode(motor_id, error, params)

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        with self.lock:
            for item in self._decoder.feed(data):
                if isinstance(item, CorruptReplyError):
                    self.counters.damaged_requests += 1
                    continue
                self.counters.requests += 1
                out += self._release_late()
                out += self._handle(item)
        return out

    def _handle(self, packet: ft_protocol.Packet) -> list[bytes]:
        code, params = packet.code, packet.params
        if code == ft_tables.SYNC_READ:
            address, length, ids = params[0], params[1], params[2:]
            out: list[bytes] = []
            for motor_id in ids:
                if motor_id in self.servos:
                    out += self._reply(self.servos[motor_id], self.servos[motor_id].read(address, length))
            return out
        if code == ft_tables.SYNC_WRITE:
            address, length = params[0], params[1]
            body = params[2:]
            for i in range(0, len(body) - length, length + 1):
                servo = self.servos.get(body[i])
                if servo is not None:
                    self._write(servo, address, bytes(body[i + 1 : i + 1 + length]))
            return []
        servo = self.servos.get(packet.motor_id)
        if servo is None:
            return []
        if code == ft_tables.PING:
            return self._reply(servo, b"")
        if code == ft_tables.READ:
            return self._reply(servo, servo.read(params[0], params[1]))
        if code == ft_tables.WRITE:
            self._write(servo, params[0], bytes(params[1:]))
            return self._reply(servo, b"") if servo.get("Response_Status_Level") else []
        return []


class DynamixelFakeBus(FakeServoBus):
    """Dynamixel X-series servos speaking protocol 2.0."""

    family: Family = "dynamixel"

    def __init__(self, servos: Iterable[FakeServo], baudrate: int = 1_000_000) -> None:
        super().__init__(servos, baudrate)
        self._decoder = dxl_protocol.StreamDecoder()

    def _status(self, motor_id: int, error: int, params: bytes) -> bytes:
        return dxl_protocol.encode_status(motor_id, error, params)

    def _error_byte(self, servo: FakeServo) -> int:
        return dxl_tables.ALERT_BIT if self.faults.error_bits.get(servo.motor_id) else 0

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        with self.lock:
            for item in self._decoder.feed(data):
                if isinstance(item, CorruptReplyError):
                    self.counters.damaged_requests += 1
                    continue
                if item.instruction == dxl_tables.STATUS:
                    continue
                self.counters.requests += 1
                out += self._release_late()
                out += self._handle(item)
        return out

    def _handle(self, packet: dxl_protocol.Packet) -> list[bytes]:
        instruction, params = packet.instruction, packet.params
        if instruction == dxl_tables.SYNC_READ:
            address = int.from_bytes(params[0:2], "little")
            length = int.from_bytes(params[2:4], "little")
            out: list[bytes] = []
            for motor_id in params[4:]:
                if motor_id in self.servos:
                    out += self._reply(self.servos[motor_id], self.servos[motor_id].read(address, length))
            return out
        if instruction == dxl_tables.SYNC_WRITE:
            address = int.from_bytes(params[0:2], "little")
            length = int.from_bytes(params[2:4], "little")
            body = params[4:]
            for i in range(0, len(body) - length, length + 1):
                servo = self.servos.get(body[i])
                if servo is not None:
                    self._write(servo, address, bytes(body[i + 1 : i + 1 + length]))
            return []
        if instruction == dxl_tables.PING and packet.motor_id == dxl_tables.BROADCAST_ID:
            out = []
            for servo in self.servos.values():
                out += self._reply(servo, self._ping_params(servo))
            return out
        servo = self.servos.get(packet.motor_id)
        if servo is None:
            return []
        if instruction == dxl_tables.PING:
            return self._reply(servo, self._ping_params(servo))
        if instruction == dxl_tables.READ:
            address = int.from_bytes(params[0:2], "little")
            length = int.from_bytes(params[2:4], "little")
            return self._reply(servo, servo.read(address, length))
        if instruction == dxl_tables.WRITE:
            self._write(servo, int.from_bytes(params[0:2], "little"), bytes(params[2:]))
            return self._reply(servo, b"")
        return []

    @staticmethod
    def _ping_params(servo: FakeServo) -> bytes:
        return servo.get("Model_Number").to_bytes(2, "little") + bytes((servo.get("Firmware_Version"),))


class PtyServoBus:
    """Serves a FakeServoBus on a pseudo-terminal; `port` is the path a driver opens.

    Requests that arrive while the client's baud rate differs from the servos' are ignored, as real servos
    cannot decode them. `disconnect()` closes the terminal: the client then sees I/O errors, as when a USB
    adapter is unplugged. With `emulate_wire_time`, replies are delayed by the time the request and the
    replies take on a real wire at the bus baud rate.

    Only the server thread closes the terminal's descriptors, and each exactly once, so that no descriptor
    number is closed after the system has handed it to someone else.
    """

    def __init__(self, bus: FakeServoBus, *, emulate_wire_time: bool = False) -> None:
        self.bus = bus
        self.emulate_wire_time = emulate_wire_time
        self._master, self._slave = os.openpty()
        tty.setraw(self._master)
        self.port = os.ttyname(self._slave)
        # The slave stays open here too, so the device node persists between client sessions.
        attrs = termios.tcgetattr(self._slave)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(self._slave, termios.TCSANOW, attrs)
        self._wake_r, self._wake_w = os.pipe()
        self._thread: threading.Thread | None = None
        self._disconnect = threading.Event()
        self._terminal_closed = False

    def __enter__(self) -> PtyServoBus:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=f"fake-{self.bus.family}-bus", daemon=True)
        self._thread.start()

    def _wake_and_join(self) -> None:
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=5.0)
            self._thread = None

    def stop(self) -> None:
        """Stop serving and release every descriptor (idempotent)."""
        self._disconnect.set()
        self._wake_and_join()
        self._close_terminal()
        for name in ("_wake_r", "_wake_w"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                os.close(fd)

    def disconnect(self) -> None:
        """Simulate unplugging the adapter: the client's reads and writes fail from now on."""
        self._disconnect.set()
        self._wake_and_join()
        self._close_terminal()

    @property
    def connected(self) -> bool:
        return not self._disconnect.is_set()

    def _close_terminal(self) -> None:
        if not self._terminal_closed:
            self._terminal_closed = True
            os.close(self._slave)
            os.close(self._master)

    def _serve(self) -> None:
        while not self._disconnect.is_set():
            try:
                ready, _, _ = select.select([self._master, self._wake_r], [], [], 0.5)
            except OSError:
                return
            if self._wake_r in ready or self._master not in ready:
                continue
            try:
                data = os.read(self._master, 4096)
            except OSError:
                return
            if not data:
                continue
            client_baud = port_baudrate(self._master)
            if client_baud is not None and client_baud != self.bus.baudrate:
                with self.bus.lock:
                    self.bus.counters.ignored_wrong_baud += 1
                continue
            replies = self.bus.feed(data)
            if self.emulate_wire_time:
                n_bytes = len(data) + sum(len(r) for r in replies)
                _sleep_precise(n_bytes * 10.0 / self.bus.baudrate)
            if replies:
                with self.bus.lock:
                    delay = self.bus.faults.take_delay()
                if delay > 0:
                    time.sleep(delay)
            if replies and not self._disconnect.is_set():
                try:
                    os.write(self._master, b"".join(replies))
                except OSError:
                    return


def _sleep_precise(seconds: float) -> None:
    end = time.perf_counter() + seconds
    if seconds > 0.002:
        time.sleep(seconds - 0.001)
    while time.perf_counter() < end:
        pass


def make_servos(
    family: Family,
    motors: Sequence[tuple[int, ModelInfo]],
    *,
    baudrate: int = 1_000_000,
    positions: Sequence[float] | None = None,
    dynamics: Dynamics | None = None,
) -> list[FakeServo]:
    """Servos with the given ids and models, at `positions` (Present_Position ticks; default mid-range)."""
    servos = []
    for i, (motor_id, model) in enumerate(motors):
        code = model.baudrates.get(baudrate)
        if code is None:
            raise ValueError(f"{model.name} cannot run at {baudrate} baud; it supports {sorted(model.baudrates)}")
        physical = positions[i] if positions is not None else model.resolution / 2
        servos.append(FakeServo(motor_id, model, family, physical=physical, baudrate_code=code, dynamics=dynamics))
    return servos


def make_bus(family: Family, servos: Iterable[FakeServo], baudrate: int = 1_000_000) -> FakeServoBus:
    """The fake bus of `family`."""
    if family == "feetech":
        return FeetechFakeBus(servos, baudrate)
    return DynamixelFakeBus(servos, baudrate)
