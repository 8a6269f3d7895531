"""The capture thread: reads a source as fast as it delivers, keeps only the newest frame, reconnects.

Publishing never waits on the device: the consumer takes the newest frame (`wait_newer`), and frames that
were replaced before anyone took them count as dropped.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from lerobot_drivers.cameras.errors import CameraDisconnectedError, CameraError
from lerobot_drivers.cameras.sources import CameraMode, CapturedFrame, FrameSource

READ_TIMEOUT_S = 0.2
FPS_WINDOW_S = 2.0


@dataclass(frozen=True)
class Frame:
    """A captured frame with its sequence number (1, 2, ... in capture order, across reconnects)."""

    seq: int
    captured: CapturedFrame
    monotonic: float


@dataclass
class CaptureStats:
    """Counters for diagnostics."""

    captured: int = 0
    taken: int = 0
    dropped: int = 0
    reconnects: int = 0
    connected: bool = False
    last_error: str = ""
    fps: float = 0.0
    last_frame_age_s: float = float("inf")


class CaptureThread:
    """Runs `source.read` in a thread; the source must already be open (its first `open` is the caller's,
    so a missing device fails at configure time), later reopens are the thread's.

    `on_event(kind, text)` is called from the thread with kind ``disconnected`` or ``reconnected``.
    """

    def __init__(
        self,
        source: FrameSource,
        mode: CameraMode,
        reconnect_period_s: float = 1.0,
        on_event: Callable[[str, str], None] | None = None,
    ) -> None:
        self.source = source
        self.mode = mode
        self.reconnect_period_s = reconnect_period_s
        self._on_event = on_event
        self._cond = threading.Condition()
        self._latest: Frame | None = None
        self._last_taken = 0
        self._stats = CaptureStats(connected=True)
        self._times: collections.deque[float] = collections.deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="camera_capture", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread and close the source."""
        self._stop.set()
        self.source.close()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout_s)

    def _event(self, kind: str, text: str) -> None:
        if self._on_event is not None:
            self._on_event(kind, text)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._stats.connected and not self._reconnect():
                continue
            try:
                captured = self.source.read(READ_TIMEOUT_S)
            except CameraDisconnectedError as err:
                self.source.close()
                with self._cond:
                    self._stats.connected = False
                    self._stats.last_error = str(err)
                self._event("disconnected", str(err))
                continue
            if captured is not None:
                self._store(captured)

    def _reconnect(self) -> bool:
        try:
            mode = self.source.open()
        except CameraError as err:
            with self._cond:
                self._stats.last_error = str(err)
            self._stop.wait(self.reconnect_period_s)
            return False
        with self._cond:
            self._stats.connected = True
            self._stats.reconnects += 1
        self._event("reconnected", f"{self.source.description}: {mode}")
        return True

    def _store(self, captured: CapturedFrame) -> None:
        now = time.monotonic()
        with self._cond:
            self._stats.captured += 1
            self._latest = Frame(self._stats.captured, captured, now)
            self._times.append(now)
            while self._times and now - self._times[0] > FPS_WINDOW_S:
                self._times.popleft()
            self._cond.notify_all()

    def wait_newer(self, timeout_s: float) -> Frame | None:
        """The newest frame not yet taken, waiting up to `timeout_s`; None on timeout or stop."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._stop.is_set():
                frame = self._latest
                if frame is not None and frame.seq > self._last_taken:
                    self._stats.dropped += frame.seq - self._last_taken - 1
                    self._stats.taken += 1
                    self._last_taken = frame.seq
                    return frame
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
        return None

    def stats(self) -> CaptureStats:
        """A snapshot of the counters; fps over the last couple of seconds."""
        now = time.monotonic()
        with self._cond:
            times = list(self._times)
            stats = CaptureStats(**vars(self._stats))
            latest = self._latest
        recent = [t for t in times if now - t <= FPS_WINDOW_S]
        stats.fps = (len(recent) - 1) / (recent[-1] - recent[0]) if len(recent) > 1 and recent[-1] > recent[0] else 0.0
        stats.last_frame_age_s = now - latest.monotonic if latest is not None else float("inf")
        return stats
