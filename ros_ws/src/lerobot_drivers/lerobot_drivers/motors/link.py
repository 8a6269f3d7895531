"""Request/reply transactions on a serial port, for servo protocols whose replies carry no sequence number.

A status packet names the motor that sent it and carries its data bytes, nothing that says which request it
answers. A reply that comes after its request timed out (a busy host, a fake bus in a starved thread, a slow
adapter) would then be taken as the answer to the next request, and that one's answer as the answer to the one
after: a ping answered by the previous read's data ("does not answer"), or a register read answered with the
previous register's values. `PacketLink` keeps request and reply in step:

- a reply is accepted only from an expected id and with the data length the request asked for; anything else
  is stale (an answer to an earlier request) and is dropped and counted;
- replies still owed by requests that timed out are remembered by shape (id, data length); before a request
  whose replies have the same shape as an owed one is sent, the owed replies are waited for (at most one
  timeout) and dropped, so a late answer to an earlier request is never taken for this one's;
- before each request, what the port already holds is read and dropped (counted when it was owed).
"""

from __future__ import annotations

import termios
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import serial

from lerobot_drivers.motors.errors import CorruptReplyError, DisconnectedError, NoReplyError

P = TypeVar("P")
P_co = TypeVar("P_co", covariant=True)
Shape = tuple[int, int]  # (motor id, data bytes of its status packet)
_SERIAL_ERRORS = (serial.SerialException, OSError, termios.error)


@dataclass(frozen=True)
class Status:
    """One status packet: who sent it, its error byte and its data bytes."""

    motor_id: int
    error: int
    data: bytes


class StreamDecoder(Protocol[P_co]):
    """A family's byte-stream splitter: complete packets, damaged ones as CorruptReplyError."""

    def feed(self, data: bytes) -> Sequence[P_co | CorruptReplyError]: ...


@dataclass
class LinkStats:
    """What the link dropped to stay in step."""

    stale_replies: int = 0  # status packets that answered an earlier request (late), dropped
    resync_waits: int = 0  # requests sent only after waiting for an earlier request's late replies
    lost_replies: int = 0  # owed replies that did not come within that wait
    late_from: Counter[int] = field(default_factory=Counter)  # owed replies that did come late (not lost), by id

    @property
    def late_replies(self) -> int:
        """Owed replies that did come, after their request had timed out (a busy host: not lost)."""
        return sum(self.late_from.values())


class PacketLink(Generic[P]):
    """Transactions of one family's packets on an open pyserial port.

    `status_of` turns a decoded packet into a Status, or None for a packet that is not a status (an echoed
    request). `port` returns the open port or raises DisconnectedError.
    """

    def __init__(
        self,
        name: str,
        port: Callable[[], serial.Serial],
        new_decoder: Callable[[], StreamDecoder[P]],
        status_of: Callable[[P], Status | None],
        stats: LinkStats | None = None,
    ) -> None:
        self.name = name
        self._port = port
        self._new_decoder = new_decoder
        self._status_of = status_of
        self._owed: Counter[Shape] = Counter()
        self.stats = stats if stats is not None else LinkStats()

    @property
    def owed(self) -> dict[Shape, int]:
        """Replies owed by requests that timed out, by (id, data length)."""
        return {shape: n for shape, n in self._owed.items() if n > 0}

    def transact(
        self, packet: bytes, expected: Sequence[int], data_length: int, timeout_s: float, wire_s: float
    ) -> dict[int, Status]:
        """Send `packet` and collect one status of `data_length` data bytes from each id of `expected`.

        `timeout_s` is allowed beyond `wire_s`, the request's and replies' time on the wire. Raises
        NoReplyError naming the silent ids, CorruptReplyError for a damaged reply, DisconnectedError.
        """
        shapes = [(motor_id, data_length) for motor_id in expected]
        self._settle(shapes, timeout_s + wire_s)
        port = self._port()
        try:
            port.write(packet)
        except _SERIAL_ERRORS as err:
            raise DisconnectedError(f"{self.name}: write failed ({err}); is the adapter still plugged in?") from None
        if not expected:
            return {}
        return self._collect(expected, data_length, time.monotonic() + timeout_s + wire_s)

    def _read(self, timeout: float, size: int) -> bytes:
        port = self._port()
        try:
            port.timeout = timeout  # reconfigures the port: fails too when the device is gone
            return bytes(port.read(size))
        except _SERIAL_ERRORS as err:
            raise DisconnectedError(f"{self.name}: read failed ({err}); is the adapter still plugged in?") from None

    def _pending(self) -> bytes:
        port = self._port()
        try:
            waiting = port.in_waiting
        except _SERIAL_ERRORS as err:
            raise DisconnectedError(f"{self.name}: read failed ({err}); is the adapter still plugged in?") from None
        return self._read(0, waiting) if waiting else b""

    def _drop(self, packets: Iterable[P | CorruptReplyError]) -> None:
        """Packets that answer no current request: settle what they owed."""
        for item in packets:
            if isinstance(item, CorruptReplyError):
                continue
            status = self._status_of(item)
            if status is None:
                continue
            self.stats.stale_replies += 1
            shape = (status.motor_id, len(status.data))
            if self._owed[shape] > 0:
                self._owed[shape] -= 1
                self.stats.late_from[status.motor_id] += 1

    def _settle(self, shapes: Sequence[Shape], wait_s: float) -> None:
        """Drop what the port holds; first wait for owed replies that this request's replies could be taken for."""
        decoder = self._new_decoder()
        self._drop(decoder.feed(self._pending()))
        if not any(self._owed[shape] > 0 for shape in shapes):
            return
        self.stats.resync_waits += 1
        deadline = time.monotonic() + wait_s
        while any(self._owed[shape] > 0 for shape in shapes):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._drop(decoder.feed(self._read(remaining, 1) + self._pending()))
        for shape in shapes:  # not late but lost: nothing of that shape is owed any more
            self.stats.lost_replies += self._owed.pop(shape, 0)

    def _collect(self, expected: Sequence[int], data_length: int, deadline: float) -> dict[int, Status]:
        decoder = self._new_decoder()
        wanted = set(expected)
        replies: dict[int, Status] = {}
        corrupt: list[str] = []
        while len(replies) + len(corrupt) < len(expected):
            remaining = deadline - time.monotonic()
            # Past the deadline, what already arrived still counts (the host, not the motor, was late).
            chunk = self._read(remaining, 1) + self._pending() if remaining > 0 else self._pending()
            for item in decoder.feed(chunk):
                if isinstance(item, CorruptReplyError):
                    corrupt.append(str(item))
                    continue
                status = self._status_of(item)
                if status is None:
                    continue
                if status.motor_id not in wanted or len(status.data) != data_length:
                    self._drop([item])
                    continue
                if status.motor_id in replies:  # two of the same shape: the newer answers this request
                    self.stats.stale_replies += 1
                replies[status.motor_id] = status
            if remaining <= 0:
                break
        missing = tuple(i for i in expected if i not in replies)
        if corrupt:
            raise CorruptReplyError("; ".join(corrupt))
        if missing:
            # Late rather than lost, maybe: remember them, so that a later request of the same shape is not
            # answered by them.
            self._owed.update((motor_id, data_length) for motor_id in missing)
            raise NoReplyError(f"no reply from id(s) {', '.join(map(str, missing))} within the timeout", missing)
        return replies
