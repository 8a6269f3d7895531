"""The arm controller: what target to send each cycle, from streamed commands or timed trajectories.

Pure: it takes times (s), measured positions and commands as arrays and returns the target. The driver
node feeds it; the tests drive it with made-up clocks.

Rules: on activation the target is the measured position. A streamed command older than
`command_timeout` is dropped and the target holds. Commands and trajectories with NaN/inf values, unknown
joints or non-increasing times are rejected whole and the target holds. Targets are clipped to the joint
limits, then to `max_relative_target` from the measured position (LeRobot's `max_relative_target`), then
to `max_velocity * min(dt, update_period)` from the last target that reached the motors: the velocity
limit comes last, so no other rule can make the goal step further. Crediting at most one `update_period`
per update means a gap (a silent bus, an overrun) never turns into a catch-up step; after a failed write
(`write_failed()`) the next step starts again from the goal the motors still hold. A new trajectory
splices in at its start time (JointTrajectoryController semantics): the motion up to that time is kept,
and from it the new points are followed, starting from where the old motion was at that time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class CommandRejected(ValueError):
    """A command or trajectory the controller refuses; the message says why."""


@dataclass(frozen=True)
class ControllerConfig:
    """Limits and timing of one arm. Angles in radians; 0 disables `max_relative_target` / `max_velocity`.

    `max_velocity` (rad/s) is one value for every joint or one per joint. `update_period` (s) is the
    nominal time between updates (the driver's loop period): the velocity limit credits at most this much
    time to one update, so one update moves the goal by at most `max_velocity * update_period`.
    """

    joint_names: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_relative_target: float = 0.0
    max_velocity: float | tuple[float, ...] = 0.0
    command_timeout: float = 0.5
    update_period: float = 0.01

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        if n == 0:
            raise ValueError("joint_names: at least one joint is needed")
        if len(self.lower) != n or len(self.upper) != n:
            raise ValueError(f"lower/upper: need {n} values each, got {len(self.lower)} and {len(self.upper)}")
        for name, low, high in zip(self.joint_names, self.lower, self.upper, strict=True):
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(f"limits of {name}: need finite lower < upper, got {low}..{high}")
        if not (math.isfinite(self.max_relative_target) and self.max_relative_target >= 0):
            raise ValueError(f"max_relative_target must be >= 0 (0 = off), got {self.max_relative_target}")
        velocities = self.joint_max_velocity
        if len(velocities) != n:
            raise ValueError(f"max_velocity: need one value or {n} (one per joint), got {len(velocities)}")
        for name, velocity in zip(self.joint_names, velocities, strict=True):
            if not (math.isfinite(velocity) and velocity >= 0):
                raise ValueError(f"max_velocity of {name} must be finite and >= 0 (0 = off), got {velocity}")
        if not self.command_timeout > 0:
            raise ValueError(f"command_timeout must be > 0, got {self.command_timeout}")
        if not (math.isfinite(self.update_period) and self.update_period > 0):
            raise ValueError(f"update_period must be > 0 (the loop period, s), got {self.update_period}")

    @property
    def joint_max_velocity(self) -> tuple[float, ...]:
        """`max_velocity` per joint (rad/s; 0 = no limit on that joint)."""
        if isinstance(self.max_velocity, tuple):
            return tuple(float(v) for v in self.max_velocity)
        return (float(self.max_velocity),) * len(self.joint_names)


@dataclass(frozen=True)
class ControlOutput:
    """The target of one cycle and why it differs from the request, if it does."""

    target: FloatArray
    source: str  # "hold", "command", "trajectory"
    stale: bool = False
    clipped: tuple[str, ...] = ()
    step_limited: tuple[str, ...] = ()


class ArmController:
    """Chooses each cycle's joint target; see the module docstring for the rules."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self._index = {name: i for i, name in enumerate(config.joint_names)}
        self._lower = np.array(config.lower, dtype=np.float64)
        self._upper = np.array(config.upper, dtype=np.float64)
        velocity = np.array(config.joint_max_velocity, dtype=np.float64)
        self._max_velocity = np.where(velocity > 0, velocity, np.inf)
        self._target: FloatArray | None = None
        self._unconfirmed: FloatArray | None = None
        self._last_time: float | None = None
        self._command: FloatArray | None = None
        self._command_time = 0.0
        self._knot_times: list[float] = []
        self._knots: list[FloatArray] = []

    @property
    def active(self) -> bool:
        return self._target is not None

    @property
    def target(self) -> FloatArray:
        if self._target is None:
            raise RuntimeError("controller is not active; call activate() with the measured positions")
        return self._target.copy()

    def activate(self, measured: Sequence[float] | FloatArray, now: float) -> None:
        """Start holding `measured` (never a default pose)."""
        measured = np.asarray(measured, dtype=np.float64)
        if measured.shape != (len(self._index),) or not np.all(np.isfinite(measured)):
            raise ValueError(f"measured positions must be {len(self._index)} finite values, got {measured}")
        self._target = measured.copy()
        self._unconfirmed = None
        self._last_time = now
        self._command = None
        self._knot_times, self._knots = [], []

    def deactivate(self) -> None:
        self._target = None
        self._unconfirmed = None
        self._command = None
        self._knot_times, self._knots = [], []

    def _expand(self, names: Sequence[str], values: Sequence[float], what: str) -> FloatArray:
        """Full target vector: the named joints from `values`, the others from the current target."""
        if len(names) != len(values):
            raise CommandRejected(f"{what}: {len(names)} joint names but {len(values)} positions")
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise CommandRejected(f"{what}: unknown joint(s) {unknown}; joints are {list(self._index)}")
        if len(set(names)) != len(names):
            raise CommandRejected(f"{what}: repeated joint names {list(names)}")
        array = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(array)):
            raise CommandRejected(f"{what}: non-finite position(s) {list(values)}; holding")
        full = self.target
        for name, value in zip(names, array, strict=True):
            full[self._index[name]] = value
        return full

    def command(self, names: Sequence[str], positions: Sequence[float], now: float) -> None:
        """A streamed position target (the newest one wins); cancels any trajectory."""
        full = self._expand(names, positions, "joint command")
        self._command = full
        self._command_time = now
        self._knot_times, self._knots = [], []

    def trajectory(
        self,
        names: Sequence[str],
        start_time: float,
        times_from_start: Sequence[float],
        points: Sequence[Sequence[float]],
        now: float,
    ) -> None:
        """A timed trajectory; `start_time` (same clock as `now`) is where it splices in."""
        if not points:
            raise CommandRejected("joint trajectory: no points")
        if len(times_from_start) != len(points):
            raise CommandRejected(f"joint trajectory: {len(points)} points but {len(times_from_start)} times")
        times = [float(t) for t in times_from_start]
        if not all(math.isfinite(t) and t >= 0 for t in times):
            raise CommandRejected(f"joint trajectory: times must be finite and >= 0, got {times}")
        if any(b <= a for a, b in itertools.pairwise(times)):
            raise CommandRejected(f"joint trajectory: times must increase, got {times}")
        full_points = [self._expand(names, p, f"joint trajectory point {i}") for i, p in enumerate(points)]
        splice = max(start_time, now)
        base = self._desired(splice)
        keep = [i for i, t in enumerate(self._knot_times) if t < splice]
        knot_times = [self._knot_times[i] for i in keep] + [splice]
        knots = [self._knots[i] for i in keep] + [base]
        if not keep and splice > now:
            # Hold where we are until the splice time.
            knot_times.insert(0, now)
            knots.insert(0, self._desired(now))
        for t, p in zip(times, full_points, strict=True):
            if start_time + t > splice:
                knot_times.append(start_time + t)
                knots.append(p)
        self._knot_times, self._knots = knot_times, knots
        self._command = None

    def _desired(self, t: float) -> FloatArray:
        if not self._knots:
            return self.target if self._command is None else self._command.copy()
        times = self._knot_times
        if t <= times[0]:
            return self._knots[0].copy()
        if t >= times[-1]:
            return self._knots[-1].copy()
        k = int(np.searchsorted(times, t, side="right"))
        t0, t1 = times[k - 1], times[k]
        alpha = (t - t0) / (t1 - t0)
        return self._knots[k - 1] + alpha * (self._knots[k] - self._knots[k - 1])

    def max_step(self, dt: float) -> FloatArray:
        """How far (rad, per joint) one update `dt` s after the previous one may move the goal; inf = no limit."""
        credited = min(max(0.0, dt), self.config.update_period)
        limited = np.isfinite(self._max_velocity)
        return np.where(limited, np.where(limited, self._max_velocity, 0.0) * credited, np.inf)

    def write_failed(self) -> None:
        """The target of the last `update` did not reach the motors: the next step starts from the one before."""
        if self._unconfirmed is not None and self._target is not None:
            self._target = self._unconfirmed
        self._unconfirmed = None

    def update(self, now: float, measured: Sequence[float] | FloatArray | None) -> ControlOutput:
        """The target for this cycle. `measured` may be None when the read failed (no relative clipping).

        The caller writes the target to the motors, or calls `write_failed()` when that write failed.
        """
        previous = self.target
        dt = now - (self._last_time if self._last_time is not None else now)
        self._last_time = now
        stale = False
        if self._knots:
            desired, source = self._desired(now), "trajectory"
        elif self._command is not None:
            if now - self._command_time > self.config.command_timeout:
                self._command = None
                stale = True
                desired, source = previous, "hold"
            else:
                desired, source = self._command.copy(), "command"
        else:
            desired, source = previous, "hold"
        if not np.all(np.isfinite(desired)):
            # Inputs are checked on arrival; this only guards the arithmetic (e.g. an overflowing trajectory).
            desired, source = previous, "hold"

        names = self.config.joint_names
        clipped_values = np.clip(desired, self._lower, self._upper)
        clipped = tuple(n for n, a, b in zip(names, desired, clipped_values, strict=True) if a != b)
        target = clipped_values
        limited: set[str] = set()
        if self.config.max_relative_target > 0 and measured is not None:
            here = np.asarray(measured, dtype=np.float64)
            if np.all(np.isfinite(here)):
                bound = self.config.max_relative_target
                relative = np.clip(target, here - bound, here + bound)
                limited |= {n for n, a, b in zip(names, target, relative, strict=True) if a != b}
                target = relative
        step = self.max_step(dt)
        stepped = np.clip(target, previous - step, previous + step)
        limited |= {n for n, a, b in zip(names, target, stepped, strict=True) if a != b}
        target = stepped
        self._unconfirmed = previous
        self._target = target
        return ControlOutput(
            target=target.copy(),
            source=source,
            stale=stale,
            clipped=clipped,
            step_limited=tuple(n for n in names if n in limited),
        )
