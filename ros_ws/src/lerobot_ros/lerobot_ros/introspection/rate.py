"""Receive-rate statistics for `lerobot-ros topic hz` (pure, no rclpy).

The statistics and the report read like `ros2 topic hz`: the mean of the intervals between
received messages over a sliding window, their min, max and standard deviation.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

DEFAULT_WINDOW = 10000


@dataclass(frozen=True)
class RateStats:
    """Statistics of the intervals in the window, in seconds; `rate_hz` is 1 / mean interval."""

    rate_hz: float
    min_s: float
    max_s: float
    std_dev_s: float
    window: int

    def report(self) -> str:
        """The two-line report `ros2 topic hz` prints."""
        return (
            f"average rate: {self.rate_hz:.3f}\n"
            f"\tmin: {self.min_s:.3f}s max: {self.max_s:.3f}s std dev: {self.std_dev_s:.5f}s window: {self.window}"
        )


class RateMeter:
    """Intervals between message arrivals over the last `window` intervals."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1 message interval, got {window}")
        self._intervals_ns: deque[int] = deque(maxlen=window)
        self._last_ns: int | None = None
        self.messages = 0

    def add(self, arrival_ns: int) -> None:
        """Record a message that arrived at `arrival_ns` (a monotonic clock, nanoseconds)."""
        if self._last_ns is not None:
            if arrival_ns < self._last_ns:
                raise ValueError(f"arrival times must not go back: {arrival_ns} ns after {self._last_ns} ns")
            self._intervals_ns.append(arrival_ns - self._last_ns)
        self._last_ns = arrival_ns
        self.messages += 1

    def stats(self) -> RateStats | None:
        """Statistics of the current window, or None before two messages have arrived."""
        n = len(self._intervals_ns)
        if n == 0:
            return None
        mean = sum(self._intervals_ns) / n
        variance = sum((x - mean) ** 2 for x in self._intervals_ns) / n
        return RateStats(
            rate_hz=1e9 / mean if mean > 0 else 0.0,
            min_s=min(self._intervals_ns) * 1e-9,
            max_s=max(self._intervals_ns) * 1e-9,
            std_dev_s=math.sqrt(variance) * 1e-9,
            window=n,
        )
