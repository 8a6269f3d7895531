"""Progress bars for long jobs that stay quiet in logs.

On a terminal: a tqdm bar. Anywhere else (a log file, CI, a pipe): one plain line at most every
`SPARSE_INTERVAL_S` seconds or every 10 % of the total, and one at the end, instead of tqdm's
carriage-return updates (which fill a log with thousands of them). `LEROBOT_ROS_NO_PROGRESS=1` in the
environment, or the commands' `--no-progress`, turns them off everywhere.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Protocol, TextIO

ENV_SWITCH = "LEROBOT_ROS_NO_PROGRESS"
SPARSE_INTERVAL_S = 10.0
SPARSE_FRACTION = 0.1


class Progress(Protocol):
    """What the jobs call: tqdm's `update`, `set_postfix` and `close`."""

    def update(self, n: float = 1) -> Any: ...

    def set_postfix(self, **values: Any) -> Any: ...

    def close(self) -> Any: ...


def progress_disabled(environ: dict[str, str] | None = None) -> bool:
    value = (os.environ if environ is None else environ).get(ENV_SWITCH, "")
    return value.strip().lower() not in ("", "0", "false", "no")


class SparseProgress:
    """Plain progress lines for a non-terminal stream (see the module docstring)."""

    def __init__(
        self,
        stream: TextIO,
        desc: str,
        unit: str,
        total: float | None = None,
        initial: float = 0,
        interval_s: float = SPARSE_INTERVAL_S,
        clock: Any = time.monotonic,
    ) -> None:
        self.stream, self.desc, self.unit, self.total = stream, desc, unit, total
        self.n = initial
        self.interval_s = interval_s
        self.clock = clock
        self.started = clock()
        self.last_time = self.started
        self.last_n = initial
        self.postfix = ""
        self.lines = 0
        self.closed = False

    def update(self, n: float = 1) -> None:
        self.n += n
        now = self.clock()
        step = self.total * SPARSE_FRACTION if self.total else None
        if now - self.last_time >= self.interval_s or (step is not None and self.n - self.last_n >= step):
            self._write(now)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = ", ".join(f"{key}={value}" for key, value in values.items())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.n != self.last_n or self.lines == 0:
                self._write(self.clock())

    def _write(self, now: float) -> None:
        elapsed = max(now - self.started, 1e-9)
        count = f"{self.n:g}/{self.total:g} ({100 * self.n / self.total:.0f} %)" if self.total else f"{self.n:g}"
        rate = f"{(self.n - self.last_n) / max(now - self.last_time, 1e-9):.3g} {self.unit}/s"
        extra = f", {self.postfix}" if self.postfix else ""
        self.stream.write(f"{self.desc}: {count} {self.unit}, {rate}, {elapsed:.0f} s{extra}\n")
        self.stream.flush()
        self.last_time, self.last_n = now, self.n
        self.lines += 1


def progress_bar(
    desc: str, unit: str, *, total: float | None = None, initial: float = 0, stream: TextIO | None = None
) -> Progress | None:
    """A tqdm bar on a terminal, sparse lines elsewhere, None when progress is switched off."""
    if progress_disabled():
        return None
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        from tqdm import tqdm

        bar: Progress = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream, dynamic_ncols=True)
        return bar
    return SparseProgress(stream, desc, unit, total, initial)
