"""The motor-bus interface every servo family implements, and the logic they share.

A family (Feetech, Dynamixel) supplies the transport: ping, read, write, sync read and sync write of raw
bytes at an address. This base class adds what is the same for all of them: register names resolved
through the model's control table, signed encodings, retries on lost or damaged replies, the check that
the motors on the bus are the ones expected, and the per-motor status bits of the last transaction.
"""

from __future__ import annotations

import abc
import contextlib
import glob
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from lerobot_drivers.motors.encoding import from_le_bytes, to_le_bytes
from lerobot_drivers.motors.errors import (
    BusCommunicationError,
    MotorSetupError,
    NoReplyError,
    PortError,
)
from lerobot_drivers.motors.link import LinkStats
from lerobot_drivers.motors.tables import ModelInfo, Register

T = TypeVar("T")
# Per-try reply timeout, at least, of everything done while setting the arm up (presence check, calibration, settings,
# torque): long enough for a busy host, short enough that a missing motor is reported within seconds (1 + retries
# tries). The control loop keeps the bus's own `timeout_s`.
SETUP_TIMEOUT_S = 0.5
# While setting up, an operation whose failed tries were answered late (the replies came, after the wait: a host
# too busy to deliver them in time, e.g. while a whole stack starts) is tried again, for at most this long.
SETUP_LATE_WINDOW_S = 10.0


@dataclass(frozen=True)
class Motor:
    """One servo on the bus: its id and model name (e.g. `sts3215`, `xl330-m288`)."""

    id: int
    model: str


@dataclass
class BusStats(LinkStats):
    """Counters of one bus since it was opened (with what its link dropped to keep replies in step)."""

    transactions: int = 0
    retries: int = 0
    failures: int = 0
    last_error: str = ""


@dataclass(frozen=True)
class Reply:
    """Data bytes of one motor's reply and the error byte its status packet carried."""

    data: bytes
    error: int = 0


@dataclass(frozen=True)
class BlockRead:
    """Result of `sync_read_block`: decoded registers per motor, and each motor's status error byte."""

    values: dict[str, dict[str, int]]
    errors: dict[str, int] = field(default_factory=dict)


def available_serial_ports() -> list[str]:
    """Serial devices that look like USB-serial adapters, for error messages."""
    return sorted(glob.glob("/dev/ttyACM*") + glob.glob("/dev/ttyUSB*") + glob.glob("/dev/tty.usbmodem*"))


class MotorBus(abc.ABC):
    """A serial bus of servos of one family, addressed by motor name."""

    family: ClassVar[str]
    models: ClassVar[Mapping[str, ModelInfo]]

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        *,
        baudrate: int = 1_000_000,
        timeout_s: float = 0.05,
        retries: int = 2,
    ) -> None:
        for name, motor in motors.items():
            if motor.model not in self.models:
                known = ", ".join(self.models)
                raise ValueError(f"motor {name!r}: model {motor.model!r} is not a {self.family} model; known: {known}")
        ids = [m.id for m in motors.values()]
        if len(set(ids)) != len(ids):
            raise ValueError(f"motor ids must be unique, got {ids}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.port = port
        self.motors = dict(motors)
        self.baudrate = baudrate
        self.timeout_s = timeout_s
        self.retries = retries
        self.stats = BusStats()
        self._setting_up = False  # within `patient()`

    @property
    @abc.abstractmethod
    def is_open(self) -> bool:
        """Whether the serial port is open."""

    @abc.abstractmethod
    def open(self) -> None:
        """Open the serial port at `self.baudrate`; raises PortError."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the serial port (idempotent)."""

    @abc.abstractmethod
    def set_baudrate(self, baudrate: int) -> None:
        """Change the port's baud rate (the motors' own rate is not changed)."""

    @abc.abstractmethod
    def _ping(self, motor_id: int) -> int:
        """Model number reported by `motor_id`; raises NoReplyError."""

    @abc.abstractmethod
    def _read(self, motor_id: int, address: int, length: int) -> Reply:
        """Read `length` bytes at `address` of one motor."""

    @abc.abstractmethod
    def _write(self, motor_id: int, address: int, data: bytes) -> int:
        """Write bytes at `address` of one motor and wait for its status; returns the error byte."""

    @abc.abstractmethod
    def _sync_read(self, motor_ids: Sequence[int], address: int, length: int) -> dict[int, Reply]:
        """One SYNC READ of `length` bytes at `address` from several motors."""

    @abc.abstractmethod
    def _sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        """One SYNC WRITE (no replies)."""

    @abc.abstractmethod
    def describe_status(self, error: int) -> str:
        """Human-readable meaning of a status error byte of this family."""

    def __enter__(self) -> MotorBus:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def model_of(self, motor: str) -> ModelInfo:
        """Model description of the motor called `motor`."""
        return self.models[self._motor(motor).model]

    def _motor(self, name: str) -> Motor:
        try:
            return self.motors[name]
        except KeyError:
            raise KeyError(f"no motor called {name!r} on this bus; motors: {', '.join(self.motors)}") from None

    def _tries(self, retries: int) -> Iterator[int]:
        """Try numbers of one operation: 1 + `retries`; while setting up, more as long as replies of the failed
        tries turn out to have come late rather than not at all (the link counts them when it drops them), for at
        most SETUP_LATE_WINDOW_S. Under load a present motor's answers were delivered 0.4-1 s after the request
        while a stack of sixteen nodes started; a silent motor gives no late replies and fails after 1 + retries."""
        late_before = self.stats.late_replies if self._setting_up else 0  # not counted for the control loop
        deadline = time.monotonic() + SETUP_LATE_WINDOW_S
        attempt = 0
        while attempt <= retries or (
            self._setting_up and self.stats.late_replies > late_before and time.monotonic() < deadline
        ):
            yield attempt
            attempt += 1

    def _retrying(self, what: str, action: Callable[[], T]) -> T:
        last: BusCommunicationError | None = None
        for attempt in self._tries(self.retries):
            self.stats.transactions += 1
            if attempt:
                self.stats.retries += 1
            try:
                return action()
            except BusCommunicationError as err:
                last = err
        self.stats.failures += 1
        assert last is not None
        self.stats.last_error = f"{what}: {last}"
        raise type(last)(f"{what} failed after {1 + self.retries} tries on {self.port}: {last}") from last

    def ping(self, motor_id: int, *, retries: int | None = None) -> int | None:
        """Model number of `motor_id`, or None when nobody answers."""
        for _ in self._tries(self.retries if retries is None else retries):
            try:
                return self._ping(motor_id)
            except BusCommunicationError:
                continue
        return None

    def scan(self, motor_ids: Iterable[int]) -> dict[int, int]:
        """Ping each id once; returns `{id: model_number}` of those that answer."""
        found = {}
        for motor_id in motor_ids:
            model = self.ping(motor_id, retries=0)
            if model is not None:
                found[motor_id] = model
        return found

    @contextlib.contextmanager
    def patient(self, timeout_s: float = SETUP_TIMEOUT_S) -> Iterator[None]:
        """Within the block, each reply gets at least `timeout_s` (set-up, checks and diagnoses: not the control
        loop, whose late reply is a missed cycle; a late reply while setting up is a busy host, not a fault)."""
        timeout, self.timeout_s = self.timeout_s, max(self.timeout_s, timeout_s)
        setting_up, self._setting_up = self._setting_up, True
        try:
            yield
        finally:
            self.timeout_s = timeout
            self._setting_up = setting_up

    def verify_motors(self) -> None:
        """Check that every expected motor answers with the expected model number.

        Raises MotorSetupError listing every problem at once: missing ids (with what answered instead, and
        at which baud rate the motors answer when none answers at the configured one) and wrong models.
        """
        found = {}
        # Not the control loop: a late reply (a busy host; seen under load) is not a missing motor either, so the
        # presence check waits SETUP_TIMEOUT_S per try; only a motor that stays silent is reported missing.
        with self.patient():
            for motor in self.motors.values():
                model_number = self.ping(motor.id)  # with the bus's retries: a lost reply is not a missing motor
                if model_number is not None:
                    found[motor.id] = model_number
        if not found:
            raise MotorSetupError(self._nothing_answers_message())
        missing = [motor.id for motor in self.motors.values() if motor.id not in found]
        wrong = [
            m.id for m in self.motors.values() if m.id in found and found[m.id] != self.models[m.model].model_number
        ]
        if not missing and not wrong:
            return
        answering = self.scan(i for i in range(1, 21) if i not in found)  # a diagnosis: who is there after all
        wait_s = max(self.timeout_s, SETUP_TIMEOUT_S)
        problems = []
        for name, motor in self.motors.items():
            if motor.id in missing and (self.stats.late_from[motor.id] or motor.id in answering):
                problems.append(
                    f"motor {name!r} (id {motor.id}, {motor.model}) answers, but not within {wait_s:g} s while"
                    " the presence check ran: the host was too busy to read the port in time, or the adapter"
                    " adds latency (configure again; raise bus_timeout if it persists)"
                )
            elif motor.id in missing:
                problems.append(f"motor {name!r} (id {motor.id}, {motor.model}) does not answer")
            elif motor.id in wrong:
                expected = self.models[motor.model].model_number
                problems.append(
                    f"motor {name!r} at id {motor.id} reports model number {found[motor.id]}"
                    f" ({self._model_name(found[motor.id])}), expected {expected} ({motor.model})"
                )
        others = {i: m for i, m in answering.items() if i not in missing}
        extra = f"; other ids answering: {', '.join(f'{i} (model {m})' for i, m in sorted(others.items()))}"
        raise MotorSetupError(
            f"{self.family} bus on {self.port} at {self.baudrate} baud: "
            + "; ".join(problems)
            + (extra if others else "")
            + ". Check the wiring and the ids (LeRobot's `lerobot-setup-motors` assigns them)."
        )

    def _model_name(self, model_number: int) -> str:
        for info in self.models.values():
            if info.model_number == model_number:
                return info.name
        return "unknown model"

    def _nothing_answers_message(self) -> str:
        ids = [m.id for m in self.motors.values()]
        configured = self.baudrate
        rates = sorted({rate for m in self.motors.values() for rate in self.models[m.model].baudrates}, reverse=True)
        answering_at = None
        # A diagnosis, not the control path: give slow replies time and a second chance.
        try:
            with self.patient(0.1):
                for rate in rates:
                    if rate == configured:
                        continue
                    self.set_baudrate(rate)
                    if any(self.ping(motor_id, retries=2) is not None for motor_id in ids[:2]):
                        answering_at = rate
                        break
        finally:
            self.set_baudrate(configured)
        if answering_at is not None:
            return (
                f"no motor answered on {self.port} at {configured} baud, but motors answer at {answering_at} baud;"
                f" use baudrate {answering_at} (expected ids {ids})"
            )
        return (
            f"no motor answered on {self.port} at {configured} baud (expected ids {ids}); check that the arm is"
            " powered and that this is the arm's port"
        )

    def read(self, register: str, motor: str) -> int:
        """Signed value of `register` of one motor."""
        info = self.model_of(motor)
        reg = info.register(register)
        motor_id = self._motor(motor).id
        reply = self._retrying(
            f"read {register} of {motor!r} (id {motor_id})", lambda: self._read(motor_id, reg.address, reg.size)
        )
        return info.decode(register, from_le_bytes(reply.data))

    def write(self, register: str, motor: str, value: int) -> None:
        """Write a signed value to `register` of one motor and wait for its acknowledgement."""
        info = self.model_of(motor)
        reg = info.register(register)
        data = to_le_bytes(info.encode(register, value), reg.size)
        motor_id = self._motor(motor).id
        self._retrying(
            f"write {register}={value} to {motor!r} (id {motor_id})", lambda: self._write(motor_id, reg.address, data)
        )

    def _common_register(self, register: str, motors: Sequence[str]) -> Register:
        regs = {self.model_of(m).register(register) for m in motors}
        if len(regs) != 1:
            raise ValueError(f"{register} sits at different addresses on {', '.join(motors)}; read them one by one")
        return regs.pop()

    def sync_read(self, register: str, motors: Sequence[str] | None = None) -> dict[str, int]:
        """Signed value of `register` from several motors in one transaction."""
        names = list(self.motors) if motors is None else list(motors)
        block = self.sync_read_block(register, register, names)
        return {name: values[register] for name, values in block.values.items()}

    def sync_read_block(self, first: str, last: str, motors: Sequence[str] | None = None) -> BlockRead:
        """Read the registers from `first` to `last` (inclusive, contiguous addresses) of several motors at once.

        Every register of each motor's control table that lies entirely inside the span is decoded.
        """
        names = list(self.motors) if motors is None else list(motors)
        start = self._common_register(first, names).address
        end_reg = self._common_register(last, names)
        length = end_reg.address + end_reg.size - start
        if length <= 0:
            raise ValueError(f"{last} lies before {first}")
        ids = [self._motor(n).id for n in names]
        replies = self._retrying(f"sync read {first}..{last} of ids {ids}", lambda: self._sync_read(ids, start, length))
        values: dict[str, dict[str, int]] = {}
        errors: dict[str, int] = {}
        for name, motor_id in zip(names, ids, strict=True):
            info = self.model_of(name)
            reply = replies[motor_id]
            decoded = {}
            for reg_name, reg in info.control_table.items():
                if start <= reg.address and reg.address + reg.size <= start + length:
                    offset = reg.address - start
                    decoded[reg_name] = info.decode(reg_name, from_le_bytes(reply.data[offset : offset + reg.size]))
            values[name] = decoded
            errors[name] = reply.error
        return BlockRead(values=values, errors=errors)

    def sync_write(self, register: str, values: Mapping[str, int]) -> None:
        """Write a signed value to `register` of several motors in one transaction (not acknowledged)."""
        names = list(values)
        reg = self._common_register(register, names)
        data = {
            self._motor(name).id: to_le_bytes(self.model_of(name).encode(register, value), reg.size)
            for name, value in values.items()
        }
        self._retrying(f"sync write {register}", lambda: self._sync_write(reg.address, reg.size, data))

    def open_error(self, cause: BaseException) -> PortError:
        """A PortError for a port that cannot be opened, naming the ports that exist."""
        ports = available_serial_ports()
        hint = f"serial ports present: {', '.join(ports)}" if ports else "no USB serial port is present"
        return PortError(f"cannot open {self.port}: {cause}; {hint}")


def expect_reply(replies: Mapping[int, Reply], motor_ids: Sequence[int], what: str) -> None:
    """Raise NoReplyError naming the motors of `motor_ids` missing from `replies`."""
    missing = tuple(i for i in motor_ids if i not in replies)
    if missing:
        raise NoReplyError(f"{what}: no reply from id(s) {', '.join(map(str, missing))}", missing)
