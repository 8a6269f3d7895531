"""Terminal key presses -> recorder controls, like LeRobot's keyboard listener (right/left arrow, Esc).

Over SSH there is no X display, so the keyboard node reads its terminal in raw mode; arrows arrive as
escape sequences (``ESC [ C``), and ``n`` / ``r`` / ``q`` are accepted as well. A lone ESC byte is the Esc
key only once no sequence follows it: `flush` turns a pending ESC into Esc after the caller's short timeout.
"""

from __future__ import annotations

import contextlib
import enum
import termios
import tty
from collections.abc import Iterator


class Control(enum.Enum):
    """Recorder controls (LeRobot: exit_early, rerecord_episode, stop_recording)."""

    NEXT = "next"
    RERECORD = "rerecord"
    STOP = "stop"


ESC = 0x1B
SEQUENCES = {b"[C": Control.NEXT, b"OC": Control.NEXT, b"[D": Control.RERECORD, b"OD": Control.RERECORD}
LETTERS = {ord("n"): Control.NEXT, ord("r"): Control.RERECORD, ord("q"): Control.STOP}
# the recorder's std_srvs/Trigger services (relative to the recorder node) for each control
SERVICES = {Control.NEXT: "next_episode", Control.RERECORD: "rerecord_episode", Control.STOP: "stop_recording"}
HELP = "right arrow / n: save episode (or end the reset) | left arrow / r: re-record episode | Esc / q: stop"


class KeyDecoder:
    """Decodes terminal input bytes into controls; unknown keys and sequences are ignored."""

    def __init__(self) -> None:
        self._pending = bytearray()

    @property
    def pending_escape(self) -> bool:
        """True while an ESC waits to be told apart from the start of a sequence."""
        return bool(self._pending)

    def feed(self, data: bytes) -> list[Control]:
        """Controls completed by `data`."""
        out: list[Control] = []
        for byte in data:
            if self._pending:
                self._pending.append(byte)
                out.extend(self._sequence())
                continue
            if byte == ESC:
                self._pending.append(byte)
            elif byte in LETTERS:
                out.append(LETTERS[byte])
        return out

    def _sequence(self) -> list[Control]:
        body = bytes(self._pending[1:])
        if body == b"\x1b":  # ESC ESC: the first one was a key press
            self._pending = bytearray(b"\x1b")
            return [Control.STOP]
        if len(body) < 2:
            if body in (b"[", b"O"):
                return []
            self._pending.clear()  # ESC + other key (Alt-x): not ours
            return []
        if body[:1] in (b"[", b"O") and not (0x40 <= body[-1] <= 0x7E):
            return []  # a longer CSI sequence (parameters) is still coming
        self._pending.clear()
        control = SEQUENCES.get(body)
        return [control] if control is not None else []

    def flush(self) -> list[Control]:
        """No more bytes came for a while: a lone pending ESC is the Esc key."""
        if bytes(self._pending) == b"\x1b":
            self._pending.clear()
            return [Control.STOP]
        self._pending.clear()
        return []


@contextlib.contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """Keys arrive one by one without echo; the terminal is restored afterwards.

    Keys typed before (while the node starts) are kept: the switch does not flush pending input.
    """
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        attrs = termios.tcgetattr(fd)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
