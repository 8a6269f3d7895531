"""When the bridge takes its next simulation step: wall-clock pacing, lockstep gating, real-time factor.

Pure: every function takes the current (wall or simulated) time as a float in seconds.

Modes:
- `realtime`: one step per control period of wall time, like a real arm's fixed-rate loop.
- `lockstep`: after publishing the observation stamped `t`, the next step waits until a command stamped
  at or after `t` arrives (a controller answering every observation), or, with a positive
  `lockstep_timeout`, until that much wall time passed. With the default (0: wait as long as it takes)
  and a deterministic controller the whole closed loop is deterministic.
- `fast`: steps back to back, as fast as the CPU allows; commands apply whenever they arrive.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

from lerobot_sim_bridge.errors import InvalidConfigError


class PacingMode(str, enum.Enum):
    """How simulated time advances relative to wall time."""

    REALTIME = "realtime"
    LOCKSTEP = "lockstep"
    FAST = "fast"

    @classmethod
    def parse(cls, text: str) -> PacingMode:
        """The mode named `text`; raises `InvalidConfigError` naming the valid ones."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise InvalidConfigError(f"mode {text!r} is not one of {', '.join(m.value for m in cls)}") from None


@dataclass
class RealTimePacer:
    """Fixed-rate deadlines on the wall clock. After falling more than `max_lag_steps` behind it resyncs
    (counting an overrun) instead of stepping in a burst to catch up."""

    period: float
    max_lag_steps: int = 3
    overruns: int = 0
    _deadline: float | None = None

    def __post_init__(self) -> None:
        if not self.period > 0:
            raise InvalidConfigError(f"period must be > 0, got {self.period}")

    def delay(self, now: float) -> float:
        """Seconds to wait before the next step (<= 0: step now)."""
        if self._deadline is None:
            self._deadline = now
        return self._deadline - now

    def stepped(self, now: float) -> None:
        """Record that a step started at `now`; schedules the next deadline."""
        if self._deadline is None:
            self._deadline = now
        self._deadline += self.period
        if now - self._deadline > self.max_lag_steps * self.period:
            self.overruns += 1
            self._deadline = now + self.period


@dataclass
class LockstepGate:
    """Tracks whether the controller has answered the newest observation."""

    timeout: float
    _observation_stamp: float = 0.0
    _observed_at: float = 0.0
    _answered: bool = True
    _last_command: float = -1.0
    timeouts: int = 0

    def __post_init__(self) -> None:
        if not self.timeout >= 0:
            raise InvalidConfigError(f"lockstep_timeout must be >= 0 (0 = wait forever), got {self.timeout}")

    def observed(self, stamp: float, wall_now: float) -> None:
        """An observation stamped `stamp` (simulated time) was published at `wall_now`.

        A command stamped like it that arrived first (the controller answered the message before the publisher
        got here) has answered it already: forgetting it would wait forever for an answer that came."""
        self._observation_stamp = stamp
        self._observed_at = wall_now
        self._answered = abs(self._last_command - stamp) <= 1e-9

    def command(self, stamp: float) -> None:
        """A command arrived; stamped at or after the observation (or unstamped, 0) it answers it."""
        if stamp != 0.0:
            self._last_command = stamp
        if stamp == 0.0 or stamp >= self._observation_stamp - 1e-9:
            self._answered = True

    def ready(self, wall_now: float) -> bool:
        """Whether to step now: answered, or waited a positive `timeout` (then the previous target is held)."""
        if self._answered:
            return True
        if self.timeout > 0 and wall_now - self._observed_at >= self.timeout:
            self.timeouts += 1
            self._answered = True
            return True
        return False


@dataclass
class RealTimeFactorMeter:
    """Simulated seconds per wall second over the last `window` steps."""

    window: int = 90
    _samples: deque[tuple[float, float]] = field(default_factory=deque)

    def add(self, sim_time: float, wall_time: float) -> None:
        """Record the simulated and wall time after a step."""
        self._samples.append((sim_time, wall_time))
        while len(self._samples) > self.window:
            self._samples.popleft()

    def reset(self) -> None:
        """Forget the samples (after a pause, so waiting does not count)."""
        self._samples.clear()

    @property
    def value(self) -> float:
        """The real-time factor; 0.0 until two samples exist."""
        if len(self._samples) < 2:
            return 0.0
        (sim0, wall0), (sim1, wall1) = self._samples[0], self._samples[-1]
        return (sim1 - sim0) / (wall1 - wall0) if wall1 > wall0 else 0.0
