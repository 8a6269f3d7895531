"""Executing action chunks on a clock (pure: times in integer nanoseconds, actions as numpy arrays).

A chunk is ``(stamp, period, actions[H, D])``: step k is the target for time ``stamp + k * period`` (the
stamp is the time of the observation the chunk was computed from, so step 0 is already late when the chunk
arrives). The executor keeps a *plan*, a piecewise-linear trajectory of timed targets, and answers two
questions at any time: the target now (`target`, for per-tick command streams) and the whole remaining
horizon (`trajectory`, for JointTrajectory consumers).

When a chunk arrives at time ``now``:

* it is checked: at most `max_chunk_steps` steps ("too_long", before anything is converted), names
  (`chunk_from_rows`: every driven joint, none twice), shape, finite values, a positive stamp (`accept`, the
  message's entry point), a period in (0, `MAX_PERIOD_NS`], not stamped in the future beyond
  `future_tolerance_s` (clock skew), not entirely in the past (stale), computed from an observation at most
  `max_chunk_age_s` old ("too_old": a long horizon does not make an old observation fresh). A rejected chunk
  raises `ChunkRejected`, is counted per reason and leaves the plan untouched (the robot keeps following the
  previous plan, then holds);
* values are clipped to the joint limits;
* steps stamped before ``now`` are dropped (latency compensation): the new plan starts at ``now`` with the
  chunk's value interpolated at ``now``;
* the overlap with the plan being replaced is blended (`BlendMode`):
  ``replace`` switches at once (a jump when the chunks disagree), ``crossfade`` starts from the old plan
  and fades linearly into the new one over `crossfade_s`, ``ensemble`` is ACT's temporal ensembling:
  each future time gets the weighted mean of every prediction made for it, the i-th prediction (0 =
  oldest) weighing ``exp(-ensemble_coeff * i)``, starting from the old plan's value at ``now``; ``rtc``
  (real-time chunking) switches at once like ``replace``: the policy node made the chunk continue the
  previous one (its steps up to the inference delay are the previous chunk's, the overlap is inpainted), so
  there is nothing left to blend; a chunk with no plan to continue (the first one, after a stop or after
  starvation) cross-fades in from the current target instead.

Past the end of the plan the executor is *starved*: it holds the last target (or decelerates to a stop
over `deceleration_s`, `StarvationMode.DECELERATE`) and counts the event and its duration. Every target is
clipped to the joint limits and, with `max_velocity`, moves at most ``max_velocity * dt`` per tick, ``dt`` capped
at `velocity_window_s` (a late tick is never a jump). A clock
that jumps back by more than `clock_jump_s` (a simulation reset) drops the plan and holds; `hold` is the
software stop: it freezes the current target and refuses chunks until `enable`.

Taking a chunk over is O(horizon) (conversion, checks, clipping, blending); the tick is not (`target` looks the
plan up by bisection). A caller with a fixed-rate tick thread therefore takes chunks over in three steps:
`handover` (O(1), under the caller's lock: what the new plan blends from), `prepare` (the O(horizon) work, no
lock, any thread; it only reads the handover) and `install` (O(1), under the lock: the prepared plan replaces the
current one, unless the plan changed meanwhile by a stop, a reset or a clock jump; then it is prepared again).
`submit` and `accept` do the three in one call.
"""

from __future__ import annotations

import array
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ChunkRejected, PolicyConfigError

# Longest time between two steps of a chunk; anything longer is a malformed chunk, not a plan.
MAX_PERIOD_NS = 10 * NS
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class BlendMode(str, Enum):
    """How a new chunk takes over from the plan it replaces."""

    REPLACE = "replace"
    CROSSFADE = "crossfade"
    ENSEMBLE = "ensemble"
    RTC = "rtc"


class StarvationMode(str, Enum):
    """What the target does past the end of the plan."""

    HOLD = "hold"
    DECELERATE = "decelerate"


@dataclass(frozen=True)
class ExecutorConfig:
    """Limits and blending of a `ChunkExecutor`. Limits are in the actions' units (radians on the ROS side)."""

    joint_names: tuple[str, ...]
    lower: tuple[float, ...] | None = None
    upper: tuple[float, ...] | None = None
    max_velocity: float = 0.0
    # The most time one command's velocity limit may cover (0: no cap). A late tick (a busy machine) sent nothing in
    # its gap, so the robot still holds the previous command: moving max_velocity x the whole gap at once would be a
    # jump. The node sets two tick periods; a late target then falls behind the plan instead of leaping to it.
    velocity_window_s: float = 0.0
    blend: BlendMode = BlendMode.CROSSFADE
    crossfade_s: float = 0.1
    ensemble_coeff: float = 0.01
    future_tolerance_s: float = 0.05
    clock_jump_s: float = 0.1
    starvation: StarvationMode = StarvationMode.HOLD
    deceleration_s: float = 0.2
    # The oldest observation a chunk may have been computed from: a long horizon does not make it fresh. Covers
    # the policy's own observation age limit (0.2 s) plus a slow inference.
    max_chunk_age_s: float = 2.0
    # Longer chunks are refused before anything is converted (taking one over costs O(steps)).
    max_chunk_steps: int = 1000

    def __post_init__(self) -> None:
        if not self.joint_names:
            raise PolicyConfigError("joint_names: at least one joint is needed")
        if len(set(self.joint_names)) != len(self.joint_names):
            raise PolicyConfigError(f"joint_names: names repeat in {list(self.joint_names)}")
        size = len(self.joint_names)
        for name in ("lower", "upper"):
            values = getattr(self, name)
            if values is not None:
                if len(values) != size:
                    raise PolicyConfigError(f"{name}: {len(values)} limits for {size} joints")
                if any(math.isnan(v) for v in values):
                    raise PolicyConfigError(f"{name}: NaN limit in {list(values)}")
        if self.lower is not None and self.upper is not None:
            bad = [n for n, lo, hi in zip(self.joint_names, self.lower, self.upper, strict=True) if lo > hi]
            if bad:
                raise PolicyConfigError(f"lower/upper: lower limit above the upper one for {bad}")
        numbers = ("max_velocity", "velocity_window_s", "future_tolerance_s", "clock_jump_s", "deceleration_s")
        for name in (*numbers, "ensemble_coeff"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise PolicyConfigError(f"{name}: must be a finite number >= 0, got {value}")
        for name in ("crossfade_s", "max_chunk_age_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise PolicyConfigError(f"{name}: must be a finite number > 0, got {value}")
        if self.max_chunk_steps < 1:
            raise PolicyConfigError(f"max_chunk_steps: must be >= 1, got {self.max_chunk_steps}")
        object.__setattr__(self, "blend", BlendMode(self.blend))
        object.__setattr__(self, "starvation", StarvationMode(self.starvation))


@dataclass(frozen=True)
class Chunk:
    """Actions ``(horizon, joints)``; row k is the target for ``stamp_ns + k * period_ns``."""

    stamp_ns: int
    period_ns: int
    actions: FloatArray
    chunk_id: int = 0

    @property
    def end_ns(self) -> int:
        """Time of the last step."""
        return self.stamp_ns + (len(self.actions) - 1) * self.period_ns


@dataclass
class ExecutorStats:
    """Counters for /diagnostics and the bench."""

    chunks_accepted: int = 0
    chunks_rejected: dict[str, int] = field(default_factory=dict)
    last_rejection: str = ""
    steps_dropped_late: int = 0
    clipped_values: int = 0
    rate_limited_ticks: int = 0
    starvation_events: int = 0
    starvation_ns: int = 0
    clock_jumps: int = 0
    last_latency_s: float = 0.0
    max_latency_s: float = 0.0
    max_boundary_step: float = 0.0
    max_inner_step: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        out = dict(self.__dict__)
        out["chunks_rejected"] = dict(self.chunks_rejected)
        out["starvation_s"] = self.starvation_ns / NS
        return out


@dataclass(frozen=True)
class Plan:
    """A piecewise-linear trajectory: strictly increasing `times_ns`, `values` (N, D), prediction `counts` (N,).

    Read-only once made: a plan is handed between threads (prepared in one, executed in another).
    """

    times_ns: IntArray
    values: FloatArray
    counts: FloatArray

    @property
    def end_ns(self) -> int:
        return int(self.times_ns[-1])

    def value_at(self, t_ns: int) -> FloatArray:
        """Linear interpolation; the first/last value outside the plan (O(log N))."""
        times = self.times_ns
        if t_ns <= times[0]:
            return np.array(self.values[0], dtype=np.float64)
        if t_ns >= times[-1]:
            return np.array(self.values[-1], dtype=np.float64)
        i = int(np.searchsorted(times, t_ns, side="right")) - 1
        span = float(times[i + 1] - times[i])
        alpha = float(t_ns - times[i]) / span
        return np.asarray(self.values[i] + alpha * (self.values[i + 1] - self.values[i]), dtype=np.float64)

    def values_at(self, t_ns: IntArray) -> FloatArray:
        """`value_at` of every time in `t_ns` at once, (len(t_ns), D)."""
        times, values = self.times_ns, self.values
        t_ns = np.asarray(t_ns, dtype=np.int64)
        if len(times) == 1:
            return np.repeat(np.asarray(values[:1], dtype=np.float64), len(t_ns), axis=0)
        i = np.clip(np.searchsorted(times, t_ns, side="right") - 1, 0, len(times) - 2)
        alpha = (t_ns - times[i]).astype(np.float64) / (times[i + 1] - times[i]).astype(np.float64)
        out = values[i] + alpha[:, None] * (values[i + 1] - values[i])
        out[t_ns <= times[0]] = values[0]
        out[t_ns >= times[-1]] = values[-1]
        return np.asarray(out, dtype=np.float64)

    def count_at(self, t_ns: int) -> float:
        """Predictions made so far for time `t_ns` (0 past the end of the plan)."""
        if t_ns > self.times_ns[-1]:
            return 0.0
        i = max(int(np.searchsorted(self.times_ns, t_ns, side="right")) - 1, 0)
        return float(self.counts[i])

    def counts_at(self, t_ns: IntArray) -> FloatArray:
        """`count_at` of every time in `t_ns` at once."""
        i = np.maximum(np.searchsorted(self.times_ns, t_ns, side="right") - 1, 0)
        return np.where(np.asarray(t_ns) > self.times_ns[-1], 0.0, self.counts[i]).astype(np.float64)

    def final_velocity(self) -> FloatArray:
        """Velocity of the last segment (zero for a one-point plan), per second."""
        if len(self.times_ns) < 2:
            return np.zeros(self.values.shape[1])
        dt = float(self.times_ns[-1] - self.times_ns[-2]) / NS
        return np.asarray((self.values[-1] - self.values[-2]) / dt, dtype=np.float64)


@dataclass(frozen=True)
class Handover:
    """What a chunk taking over blends from, taken by `ChunkExecutor.handover` in O(1) (read-only afterwards)."""

    generation: int
    now_ns: int
    enabled: bool
    plan: Plan | None
    output: FloatArray | None
    config: ExecutorConfig


@dataclass(frozen=True)
class PreparedChunk:
    """A chunk checked, clipped and blended into a ready plan (`ChunkExecutor.prepare`); `install` swaps it in."""

    chunk_id: int
    generation: int
    now_ns: int
    plan: Plan
    switch_period_ns: int
    latency_s: float
    clipped_values: int
    steps_dropped_late: int


@dataclass(frozen=True)
class TrajectoryStart:
    """Where the remaining trajectory starts (`ChunkExecutor.trajectory_start`, O(log N)); `remaining_trajectory`
    does the O(N) rest from it without the executor."""

    now_ns: int
    start: FloatArray
    plan: Plan | None
    config: ExecutorConfig
    lower: FloatArray
    upper: FloatArray
    start_rate_limited: bool


class ChunkExecutor:
    """See the module docstring. Not thread-safe: the caller serialises every method but `prepare`,
    `prepare_rows` and `remaining_trajectory`, which only read what `handover` / `trajectory_start` gave them."""

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config
        size = len(config.joint_names)
        self._lower = np.asarray(config.lower if config.lower is not None else [-np.inf] * size, dtype=np.float64)
        self._upper = np.asarray(config.upper if config.upper is not None else [np.inf] * size, dtype=np.float64)
        self._plan: Plan | None = None
        # Counts every change of the plan, so that `install` sees a plan prepared against one that is gone.
        self._generation = 0
        self._output: FloatArray | None = None
        self._output_ns: int | None = None
        self._last_now: int | None = None
        self._enabled = True
        self._started = False
        self._starved_since: int | None = None
        self._switch_ns: int | None = None
        self._switch_period_ns = 0
        self.stats = ExecutorStats()

    @property
    def size(self) -> int:
        """Number of joints."""
        return len(self.config.joint_names)

    @property
    def enabled(self) -> bool:
        """False after `hold` until `enable`."""
        return self._enabled

    @property
    def output(self) -> FloatArray | None:
        """The last target handed out (or the `reset` pose); None before either."""
        return None if self._output is None else self._output.copy()

    @property
    def plan(self) -> Plan | None:
        """The current plan (None before the first chunk, after `hold` and after a clock jump)."""
        return self._plan

    @property
    def starved(self) -> bool:
        """True while the executor is past the end of its plan (and enabled, after a first chunk)."""
        return self._starved_since is not None

    def starvation_s(self, now_ns: int) -> float:
        """Total starvation time, the ongoing episode included."""
        ongoing = now_ns - self._starved_since if self._starved_since is not None else 0
        return float((self.stats.starvation_ns + max(ongoing, 0)) / NS)

    def _set_plan(self, plan: Plan | None) -> None:
        self._plan = plan
        self._generation += 1

    def reset(self, position: npt.ArrayLike, now_ns: int) -> None:
        """Start from `position` (the measured pose): the first chunk blends from it instead of jumping."""
        value = self._vector(position, "position")
        self._output = self._clip(value)
        self._output_ns = now_ns
        self._last_now = now_ns
        self._set_plan(None)

    def hold(self, now_ns: int) -> FloatArray | None:
        """Software stop: freeze at the current target, drop the plan, refuse chunks until `enable`."""
        now_ns = self._clock(now_ns)
        if self._output is None and self._plan is not None:
            self._output = self._clip(self._planned(now_ns))
        self._set_plan(None)
        self._enabled = False
        self._end_starvation(now_ns)
        return None if self._output is None else self._output.copy()

    def enable(self, position: npt.ArrayLike | None = None, now_ns: int = 0) -> None:
        """Accept chunks again, like a fresh start: the next chunk blends from `position` (the measured pose: the
        robot may have been moved while stopped, by teleoperation or a simulation reset) when given, else from
        the held target; starvation counts again from that chunk on."""
        if position is not None:
            self.reset(position, now_ns)
        self._enabled = True
        self._started = False

    def submit(self, chunk: Chunk, now_ns: int) -> None:
        """Take `chunk` over from the current plan at time `now_ns` (raises ChunkRejected; see module docs)."""
        self._take_over(lambda handover: self.prepare(chunk, handover), now_ns)

    def accept(
        self,
        names: Sequence[str],
        data: npt.ArrayLike,
        horizon: int,
        stamp_ns: int,
        period_ns: int,
        chunk_id: int,
        now_ns: int,
    ) -> None:
        """`submit` an ActionChunk's fields (`prepare_rows`); every rejection is counted, then raised."""
        self._take_over(
            lambda handover: self.prepare_rows(names, data, horizon, stamp_ns, period_ns, chunk_id, handover), now_ns
        )

    def _take_over(self, prepare: Callable[[Handover], PreparedChunk], now_ns: int) -> None:
        while True:  # one round when a single thread calls everything
            handover = self.handover(now_ns)
            try:
                installed = self.install(prepare(handover))
            except ChunkRejected as err:
                self.record_rejection(err)
                raise
            if installed:
                return

    def handover(self, now_ns: int) -> Handover:
        """What a chunk arriving at `now_ns` takes over from (O(1)); hand it to `prepare` / `prepare_rows`."""
        now_ns = self._clock(now_ns)
        if self._enabled:
            self._started = True  # the policy is running: from now on, no plan is starvation
        return Handover(self._generation, now_ns, self._enabled, self._plan, self._output, self.config)

    def prepare_rows(
        self,
        names: Sequence[str],
        data: npt.ArrayLike,
        horizon: int,
        stamp_ns: int,
        period_ns: int,
        chunk_id: int,
        handover: Handover,
    ) -> PreparedChunk:
        """`prepare` an ActionChunk's fields (`chunk_from_rows`); raises ChunkRejected, uncounted (see `install`).

        The header is checked before the data is converted, so that a chunk refused for its length or its stamp
        costs nothing. A header stamp <= 0 is refused ("stamp"): unset, or not the time of an observation.
        """
        if stamp_ns <= 0:
            raise ChunkRejected(
                "stamp",
                f"chunk {chunk_id} is stamped {stamp_ns / NS:.9f} s; the stamp must be the (positive) time of the "
                "observation the chunk was computed from",
            )
        _check_header(chunk_id, horizon, stamp_ns, period_ns, handover)
        chunk = chunk_from_rows(names, handover.config.joint_names, data, horizon, stamp_ns, period_ns, chunk_id)
        return self.prepare(chunk, handover)

    def prepare(self, chunk: Chunk, handover: Handover) -> PreparedChunk:
        """The O(horizon) part of taking `chunk` over (checks, clipping, latency compensation, blending) against
        `handover`; touches nothing of the executor. Raises ChunkRejected, uncounted (see `install`)."""
        config, now_ns = handover.config, handover.now_ns
        actions = _checked_actions(chunk, handover, self.size)
        clipped = np.clip(actions, self._lower, self._upper)
        times = chunk.stamp_ns + np.arange(len(clipped), dtype=np.int64) * chunk.period_ns
        incoming = Plan(times, clipped, np.ones(len(clipped)))
        future = times > now_ns
        new_times = np.concatenate(([now_ns], times[future])).astype(np.int64)
        new_values = np.concatenate((incoming.value_at(now_ns)[None, :], clipped[future]))
        old = _previous(handover.plan, handover.output, now_ns, config)
        blend = config.blend
        if blend is BlendMode.RTC and (handover.plan is None or now_ns > handover.plan.end_ns):
            blend = BlendMode.CROSSFADE  # nothing to continue (first chunk, after a stop or starvation): fade in
        if old is None or blend is BlendMode.REPLACE or blend is BlendMode.RTC:
            plan = Plan(new_times, new_values, np.ones(len(new_times)))
        elif blend is BlendMode.CROSSFADE:
            plan = _crossfade(old, new_times, new_values, now_ns, config.crossfade_s)
        else:
            plan = _ensemble(old, new_times, new_values, now_ns, config.ensemble_coeff)
        # Ticks until one period after the blend has resolved count as boundary steps.
        fade = int(config.crossfade_s * NS) if blend is BlendMode.CROSSFADE else 0
        return PreparedChunk(
            chunk_id=chunk.chunk_id,
            generation=handover.generation,
            now_ns=now_ns,
            plan=plan,
            switch_period_ns=chunk.period_ns + fade,
            latency_s=(now_ns - chunk.stamp_ns) / NS,
            clipped_values=int(np.count_nonzero(clipped != actions)),
            steps_dropped_late=int(np.count_nonzero(times < now_ns)),
        )

    def install(self, prepared: PreparedChunk) -> bool:
        """Make `prepared` the plan (O(1)). False when the plan it was prepared against is gone (a stop, a reset,
        a clock jump, another chunk): prepare it again from a new `handover`. Raises ChunkRejected "disabled"
        when the executor was stopped meanwhile (uncounted, like `prepare`'s: the caller `record_rejection`s)."""
        if not self._enabled:
            raise _disabled(prepared.chunk_id)
        if prepared.generation != self._generation:
            return False
        self._set_plan(prepared.plan)
        last = self._last_now if self._last_now is not None else prepared.now_ns
        self._end_starvation(max(last, prepared.now_ns))
        self._switch_ns = prepared.now_ns
        self._switch_period_ns = prepared.switch_period_ns
        stats = self.stats
        stats.clipped_values += prepared.clipped_values
        stats.steps_dropped_late += prepared.steps_dropped_late
        stats.chunks_accepted += 1
        stats.last_latency_s = prepared.latency_s
        stats.max_latency_s = max(stats.max_latency_s, prepared.latency_s)
        return True

    def target(self, now_ns: int) -> FloatArray | None:
        """The command for time `now_ns` (None before any chunk or `reset`); advances the rate limiter.

        O(log horizon): a bisection in the plan, whatever its length."""
        now_ns = self._clock(now_ns)
        if self._plan is None:
            self._note_starvation(now_ns)
            if self._output is None:
                return None
            self._output_ns = now_ns
            return self._output.copy()
        desired = self._clip(self._planned(now_ns))
        self._note_starvation(now_ns)
        if self._output is None or self._output_ns is None:
            out = desired
        else:
            out = self._rate_limit(self._output, desired, now_ns - self._output_ns)
            step = float(np.max(np.abs(out - self._output))) if now_ns > self._output_ns else 0.0
            boundary = self._switch_ns is not None and now_ns <= self._switch_ns + self._switch_period_ns
            if boundary:
                self.stats.max_boundary_step = max(self.stats.max_boundary_step, step)
            else:
                self.stats.max_inner_step = max(self.stats.max_inner_step, step)
        self._output, self._output_ns = out, now_ns
        return out.copy()

    def trajectory(self, now_ns: int) -> tuple[IntArray, FloatArray] | None:
        """The remaining plan from `now_ns` as (times, values), limits and max velocity applied; None if none."""
        start = self.trajectory_start(now_ns)
        if start is None:
            return None
        times, values, limited = remaining_trajectory(start)
        self.stats.rate_limited_ticks += limited
        return times, values

    def trajectory_start(self, now_ns: int) -> TrajectoryStart | None:
        """The first point of `trajectory` (O(log horizon)); `remaining_trajectory` makes the rest without the
        executor. None before any chunk or `reset`."""
        now_ns = self._clock(now_ns)
        if self._plan is None:
            if self._output is None:
                return None
            output = self._output.copy()
            return TrajectoryStart(now_ns, output, None, self.config, self._lower, self._upper, False)
        desired = self._clip(self._planned(now_ns))
        start, limited = desired, False
        if self._output is not None and self._output_ns is not None and self._output_ns <= now_ns:
            start, limited = _limit_step(self._output, desired, now_ns - self._output_ns, self.config)
        return TrajectoryStart(now_ns, start, self._plan, self.config, self._lower, self._upper, limited)

    def _vector(self, value: npt.ArrayLike, what: str) -> FloatArray:
        array = np.asarray(value, dtype=np.float64).reshape(-1)
        if array.shape != (self.size,):
            raise ChunkRejected("shape", f"{what} has {array.size} values, the executor drives {self.size} joints")
        if not np.all(np.isfinite(array)):
            raise ChunkRejected("non_finite", f"{what} holds NaN or inf: {array.tolist()}")
        return array

    def record_rejection(self, error: ChunkRejected) -> None:
        """Count a chunk rejected before it reached `install` (by `prepare`, `prepare_rows`, `chunk_from_rows`)."""
        self.stats.chunks_rejected[error.reason] = self.stats.chunks_rejected.get(error.reason, 0) + 1
        self.stats.last_rejection = str(error)

    def _clock(self, now_ns: int) -> int:
        """Monotonic time; a jump back beyond `clock_jump_s` drops the plan and holds."""
        last = self._last_now
        if last is not None and now_ns < last:
            if last - now_ns <= self.config.clock_jump_s * NS:
                return last
            self.stats.clock_jumps += 1
            if self._plan is not None:
                self._output = self._clip(self._planned(last))
            self._set_plan(None)
            self._starved_since = None
            self._switch_ns = None
            self._output_ns = now_ns
        self._last_now = now_ns
        return now_ns

    def _planned(self, now_ns: int) -> FloatArray:
        """The plan's value at `now_ns`, extended past its end by hold or deceleration."""
        plan = self._plan
        assert plan is not None
        return _extended_value(plan, now_ns, self.config)

    def _note_starvation(self, now_ns: int) -> None:
        plan = self._plan
        starving = self._enabled and self._started and (plan is None or now_ns > plan.end_ns)
        if starving and self._starved_since is None:
            self.stats.starvation_events += 1
            self._starved_since = plan.end_ns if plan is not None else now_ns
        elif not starving:
            self._end_starvation(now_ns)

    def _end_starvation(self, now_ns: int) -> None:
        if self._starved_since is not None:
            self.stats.starvation_ns += max(now_ns - self._starved_since, 0)
            self._starved_since = None

    def _clip(self, value: FloatArray) -> FloatArray:
        return np.asarray(np.clip(value, self._lower, self._upper), dtype=np.float64)

    def _rate_limit(self, current: FloatArray, desired: FloatArray, dt_ns: int) -> FloatArray:
        out, limited = _limit_step(current, desired, dt_ns, self.config)
        if limited:
            self.stats.rate_limited_ticks += 1
        return out


def _disabled(chunk_id: int) -> ChunkRejected:
    return ChunkRejected("disabled", f"chunk {chunk_id} ignored: the executor is disabled (software stop)")


def _check_header(chunk_id: int, horizon: int, stamp_ns: int, period_ns: int, handover: Handover) -> None:
    """The checks that need no data (O(1)): stopped, length, period, stamp against `handover.now_ns`."""
    config, now_ns = handover.config, handover.now_ns
    if not handover.enabled:
        raise _disabled(chunk_id)
    if horizon < 1:
        raise ChunkRejected("shape", f"chunk {chunk_id} has horizon {horizon}; a chunk has at least one step")
    if horizon > config.max_chunk_steps:
        raise ChunkRejected(
            "too_long",
            f"chunk {chunk_id} has {horizon} steps, more than max_chunk_steps = {config.max_chunk_steps}; raise "
            "max_chunk_steps if the policy's chunks are that long",
        )
    if (period_ns <= 0 and horizon > 1) or period_ns > MAX_PERIOD_NS:
        raise ChunkRejected(
            "period", f"chunk {chunk_id} has period {period_ns} ns; it must be > 0 and <= {MAX_PERIOD_NS} ns"
        )
    ahead = stamp_ns - now_ns
    if ahead > config.future_tolerance_s * NS:
        raise ChunkRejected(
            "future",
            f"chunk {chunk_id} is stamped {ahead / NS:.3f} s in the future (clock skew between the policy's "
            f"observations and this clock?); tolerance {config.future_tolerance_s} s",
        )
    end_ns = stamp_ns + (max(horizon, 1) - 1) * period_ns
    if end_ns < now_ns:
        raise ChunkRejected(
            "stale",
            f"chunk {chunk_id} ended {(now_ns - end_ns) / NS:.3f} s ago (inference slower than the chunk, or a "
            "clock mismatch); holding",
        )
    age = (now_ns - stamp_ns) / NS
    if age > config.max_chunk_age_s:
        raise ChunkRejected(
            "too_old",
            f"chunk {chunk_id} was computed from an observation {age:.3f} s old, older than max_chunk_age = "
            f"{config.max_chunk_age_s:g} s; raise max_chunk_age if inference is that slow, else check the clocks",
        )


def _checked_actions(chunk: Chunk, handover: Handover, size: int) -> FloatArray:
    """`chunk`'s actions once every check passed (raises ChunkRejected, uncounted)."""
    names = handover.config.joint_names
    if not handover.enabled:
        raise _disabled(chunk.chunk_id)  # before the shape: a stopped executor looks at nothing
    actions = np.asarray(chunk.actions, dtype=np.float64)
    if actions.ndim != 2 or actions.shape[0] < 1 or actions.shape[1] != size:
        raise ChunkRejected(
            "shape",
            f"chunk {chunk.chunk_id} has shape {actions.shape}, expected (horizon >= 1, {size}) for joints "
            f"{list(names)}; check the policy's action features",
        )
    _check_header(chunk.chunk_id, len(actions), chunk.stamp_ns, chunk.period_ns, handover)
    if not np.all(np.isfinite(actions)):
        bad = sorted({names[j] for j in np.argwhere(~np.isfinite(actions))[:, 1]})
        raise ChunkRejected("non_finite", f"chunk {chunk.chunk_id} holds NaN/inf for {bad}; holding instead")
    return actions


def _extended_value(plan: Plan, now_ns: int, config: ExecutorConfig) -> FloatArray:
    """`plan`'s value at `now_ns`, extended past its end by hold or deceleration."""
    if now_ns <= plan.end_ns or config.starvation is StarvationMode.HOLD:
        return plan.value_at(now_ns)
    period = config.deceleration_s
    velocity = plan.final_velocity()
    tau = min((now_ns - plan.end_ns) / NS, period)
    travelled = tau - tau * tau / (2 * period) if period > 0 else 0.0
    return np.asarray(plan.values[-1] + velocity * travelled, dtype=np.float64)


def _previous(plan: Plan | None, output: FloatArray | None, now_ns: int, config: ExecutorConfig) -> Plan | None:
    """What was planned from `now_ns` on, as a plan to blend from (None: nothing to blend from)."""
    if plan is not None:
        if now_ns <= plan.end_ns:
            return plan
        value = _extended_value(plan, now_ns, config)
        return Plan(np.array([now_ns], dtype=np.int64), value[None, :], np.ones(1))
    if output is not None:
        return Plan(np.array([now_ns], dtype=np.int64), output[None, :].copy(), np.ones(1))
    return None


def _crossfade(old: Plan, times: IntArray, values: FloatArray, now_ns: int, crossfade_s: float) -> Plan:
    window = crossfade_s * NS
    fade_end = now_ns + int(window)
    if not np.any(times == fade_end) and fade_end < times[-1]:
        # A grid point where the fade completes keeps the blended curve faithful to the new chunk after it.
        i = int(np.searchsorted(times, fade_end))
        new_value = Plan(times, values, np.ones(len(times))).value_at(fade_end)
        times = np.insert(times, i, fade_end)
        values = np.insert(values, i, new_value, axis=0)
    out = values.copy()
    fading = int(np.searchsorted(times, fade_end, side="right"))  # past the fade: the new chunk as it is
    weights = np.minimum((times[:fading] - now_ns).astype(np.float64) / window, 1.0)[:, None]
    out[:fading] = (1.0 - weights) * old.values_at(times[:fading]) + weights * values[:fading]
    return Plan(times, out, np.ones(len(times)))


def _ensemble(old: Plan, times: IntArray, values: FloatArray, now_ns: int, coeff: float) -> Plan:
    m = coeff
    previous = old.counts_at(times)
    weight_sum = previous if m == 0 else (1.0 - np.exp(-m * previous)) / (1.0 - math.exp(-m))
    weight = np.exp(-m * previous)
    with np.errstate(invalid="ignore", divide="ignore"):
        blended = (old.values_at(times) * weight_sum[:, None] + values * weight[:, None]) / (weight_sum + weight)[
            :, None
        ]
    fresh = previous == 0
    out = np.where(fresh[:, None], values, blended)
    counts = np.where(fresh, 1.0, previous + 1.0)
    out[0] = old.value_at(now_ns)
    counts[0] = old.count_at(now_ns)
    return Plan(times, out, counts)


def _limit_step(
    current: FloatArray, desired: FloatArray, dt_ns: int, config: ExecutorConfig
) -> tuple[FloatArray, bool]:
    """`desired`, moved at most max_velocity x dt (dt capped at the velocity window) from `current`; and whether
    the limit cut it."""
    if config.max_velocity <= 0:
        return desired, False
    dt_s = max(dt_ns, 0) / NS
    if config.velocity_window_s > 0:
        dt_s = min(dt_s, config.velocity_window_s)
    step = config.max_velocity * dt_s
    delta = desired - current
    limited = bool(np.any(np.abs(delta) > step))
    return np.asarray(current + np.clip(delta, -step, step), dtype=np.float64), limited


def remaining_trajectory(start: TrajectoryStart) -> tuple[IntArray, FloatArray, int]:
    """The trajectory from `start` on as (times, values), limits and max velocity applied, and how many points
    the velocity limit cut (O(horizon), without the executor: run it off the tick thread)."""
    plan, now_ns = start.plan, start.now_ns
    if plan is None:
        return np.array([now_ns], dtype=np.int64), start.start[None, :].copy(), int(start.start_rate_limited)
    later = plan.times_ns > now_ns
    times = np.concatenate(([now_ns], plan.times_ns[later])).astype(np.int64)
    desired = np.clip(plan.values[later], start.lower, start.upper)
    values = np.empty((len(times), len(start.start)))
    values[0] = start.start
    values[1:] = desired
    limited = int(start.start_rate_limited)
    config = start.config
    if config.max_velocity <= 0 or len(times) < 2:
        return times, values, limited
    dt_s = np.diff(times).astype(np.float64) / NS
    if config.velocity_window_s > 0:
        dt_s = np.minimum(dt_s, config.velocity_window_s)
    steps = config.max_velocity * dt_s
    if np.all(np.abs(np.diff(values, axis=0)) <= steps[:, None]):
        return times, values, limited  # nothing to cut: no per-point work
    for i in range(1, len(times)):
        values[i], cut = _limit_step(values[i - 1], desired[i - 1], int(times[i] - times[i - 1]), config)
        limited += int(cut)
    return times, values, limited


def chunk_from_rows(
    names: Sequence[str],
    joint_names: Sequence[str],
    data: npt.ArrayLike,
    horizon: int,
    stamp_ns: int,
    period_ns: int,
    chunk_id: int = 0,
) -> Chunk:
    """A `Chunk` in `joint_names` order from a flat row-major ``horizon x len(names)`` array (an ActionChunk).

    Raises ChunkRejected: "names" when a driven joint is missing or a name repeats (extra names are ignored),
    "shape" when the sizes disagree.
    """
    count = _value_count(data)
    if horizon < 1 or count != horizon * len(names):
        raise ChunkRejected(
            "shape", f"chunk {chunk_id}: {count} values for horizon {horizon} x {len(names)} names; malformed chunk"
        )
    index = {name: i for i, name in enumerate(names)}
    if len(index) != len(names):
        repeated = sorted({n for n in names if list(names).count(n) > 1})
        raise ChunkRejected("names", f"chunk {chunk_id} names {repeated} more than once; malformed chunk")
    missing = [j for j in joint_names if j not in index]
    if missing:
        raise ChunkRejected(
            "names",
            f"chunk {chunk_id} lacks joints {missing} (it names {list(names)}); the policy's action features must "
            "cover the executor's joint_names",
        )
    flat = np.asarray(data, dtype=np.float64).reshape(-1)
    rows = flat.reshape(horizon, len(names))[:, [index[j] for j in joint_names]]
    return Chunk(stamp_ns, period_ns, rows, chunk_id)


def _value_count(data: npt.ArrayLike) -> int:
    """How many values `data` holds, without converting a flat array (an ActionChunk's array.array) or ndarray."""
    if isinstance(data, np.ndarray):
        return int(data.size)
    if isinstance(data, array.array):
        return len(data)
    return int(np.size(data))
