"""Why an evaluated episode failed, from what the nodes publish while it runs (pure: no rclpy).

An evaluation through ROS runs on two clocks: the episode's own (the sim bridge's steps; its time limit is
`max_episode_steps` of them) and the wall clock the policy node and the action executor work on. A policy that
succeeds in lockstep can fail in real time for reasons that are not its own: the executor held the arm because
no chunk was left (starvation), observations reached the policy too late (refused as stale, or chunks whose
first steps had already passed when they arrived), or the sim stepped slower than real time, so that every wall-
clock delay costs more of the episode. `classify` names the cause of a failed episode from those signals:

- `sim_behind_real_time`: the episode's simulated seconds per wall second (while the policy drove it) were below
  `CauseThresholds.real_time_factor`;
- `late_observations`: the policy node refused observations as too old, or the executor dropped at least
  `late_steps_fraction` of the chunks' steps because their time had passed when the chunk arrived;
- `starved`: the executor held position (no chunk left) for at least `starved_fraction` of the episode;
- `late_start`: the sim ran at least `late_start_fraction` of the episode's steps before the executor took
  control (the first chunk of the episode came late);
- `policy_failed`: none of those; the policy's own mistake.

Several can apply; the first in that order is the episode's `cause` (a sim behind real time makes observations
late, late observations starve the executor), the others are listed too.

`DiagnosticsLog` keeps the /diagnostics values of each node with their receive times, so that an episode's
counters are the difference between the last report before it started and the first report after it ended.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SIM_BEHIND = "sim_behind_real_time"
LATE_OBSERVATIONS = "late_observations"
STARVED = "starved"
LATE_START = "late_start"
POLICY_FAILED = "policy_failed"
CAUSES = (SIM_BEHIND, LATE_OBSERVATIONS, STARVED, LATE_START, POLICY_FAILED)

EXECUTOR, POLICY, SIM = "executor", "policy", "sim"


@dataclass(frozen=True)
class CauseThresholds:
    """Where a signal becomes a cause (fractions of the episode; the sim bridge warns below a factor of 0.9)."""

    starved_fraction: float = 0.05
    real_time_factor: float = 0.9
    stale_observations: int = 1
    late_steps_fraction: float = 0.25
    late_start_fraction: float = 0.1

    def __post_init__(self) -> None:
        for name in ("starved_fraction", "real_time_factor", "late_steps_fraction", "late_start_fraction"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if self.stale_observations < 1:
            raise ValueError(f"stale_observations must be >= 1, got {self.stale_observations}")


@dataclass(frozen=True)
class EpisodeSignals:
    """What the nodes reported during one episode (counters as differences over the episode).

    `wall_s` and `controlled_steps` cover the same stretch: from the executor taking control to the episode's end.
    """

    fps: float
    steps: int
    steps_before_control: int
    wall_s: float
    starvation_s: float = 0.0
    starvation_events: int = 0
    rate_limited_ticks: int = 0
    steps_dropped_late: int = 0
    chunk_steps: int = 0
    chunks_rejected: Mapping[str, int] = field(default_factory=dict)
    stale_observations: int = 0
    observation_age_max_s: float = 0.0
    chunk_latency_p50_s: float = 0.0
    chunk_latency_p99_s: float = 0.0
    tick_jitter_p99_ms: float = 0.0
    sim_real_time_factor_min: float = 0.0

    @property
    def controlled_steps(self) -> int:
        return max(0, self.steps - self.steps_before_control)

    @property
    def real_time_factor(self) -> float:
        """Simulated seconds per wall second while the policy drove the episode (0 when unknown)."""
        if self.wall_s <= 0 or self.fps <= 0:
            return 0.0
        return self.controlled_steps / self.fps / self.wall_s

    @property
    def starved_fraction(self) -> float:
        return min(1.0, self.starvation_s / self.wall_s) if self.wall_s > 0 else 0.0

    @property
    def late_steps_fraction(self) -> float:
        return self.steps_dropped_late / self.chunk_steps if self.chunk_steps > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, rounded; the derived fractions included."""
        out: dict[str, Any] = {
            "steps": self.steps,
            "steps_before_control": self.steps_before_control,
            "wall_s": round(self.wall_s, 3),
            "real_time_factor": round(self.real_time_factor, 3),
            "starvation_s": round(self.starvation_s, 3),
            "starved_fraction": round(self.starved_fraction, 3),
            "starvation_events": self.starvation_events,
            "rate_limited_ticks": self.rate_limited_ticks,
            "steps_dropped_late": self.steps_dropped_late,
            "late_steps_fraction": round(self.late_steps_fraction, 3),
            "chunks_rejected": dict(self.chunks_rejected),
            "stale_observations": self.stale_observations,
            "observation_age_max_s": round(self.observation_age_max_s, 4),
            "chunk_latency_p50_s": round(self.chunk_latency_p50_s, 4),
            "chunk_latency_p99_s": round(self.chunk_latency_p99_s, 4),
            "tick_jitter_p99_ms": round(self.tick_jitter_p99_ms, 3),
            "sim_real_time_factor_min": round(self.sim_real_time_factor_min, 3),
        }
        return out


@dataclass(frozen=True)
class Diagnosis:
    """A failed episode's cause (the first that applies), every cause that applies, and one line saying why."""

    cause: str
    causes: tuple[str, ...]
    text: str


def classify(success: bool, signals: EpisodeSignals | None, thresholds: CauseThresholds | None = None) -> Diagnosis:
    """The cause of an episode's failure (`cause` "" for a success; `policy_failed` without signals)."""
    if success:
        return Diagnosis("", (), "")
    if signals is None:
        return Diagnosis(POLICY_FAILED, (POLICY_FAILED,), "policy_failed (no real-time effects: lockstep)")
    t = thresholds or CauseThresholds()
    found: list[tuple[str, str]] = []
    rtf = signals.real_time_factor
    if 0 < rtf < t.real_time_factor:
        found.append((SIM_BEHIND, f"sim at {rtf:.2f}x real time"))
    late = signals.late_steps_fraction
    if signals.stale_observations >= t.stale_observations or late >= t.late_steps_fraction:
        found.append(
            (
                LATE_OBSERVATIONS,
                f"{signals.stale_observations} stale observation(s) refused, {late:.0%} of chunk steps late",
            )
        )
    if signals.wall_s > 0 and signals.starved_fraction >= t.starved_fraction:
        found.append((STARVED, f"executor held {signals.starved_fraction:.0%} of the episode"))
    if signals.steps > 0 and signals.steps_before_control / signals.steps >= t.late_start_fraction:
        found.append((LATE_START, f"{signals.steps_before_control} of {signals.steps} steps before the first chunk"))
    if not found:
        return Diagnosis(POLICY_FAILED, (POLICY_FAILED,), "policy_failed (no starvation, late data or slow sim)")
    cause, why = found[0]
    others = "; ".join(f"{c}: {w}" for c, w in found[1:])
    return Diagnosis(cause, tuple(c for c, _ in found), f"{cause} ({why})" + (f"; also {others}" if others else ""))


def diagnostics_source(name: str, namespace: str = "") -> str | None:
    """Which node a /diagnostics status name belongs to (`namespace`: only that robot's executor and sim)."""
    if name.endswith(": policy"):
        return POLICY
    if not name.startswith(namespace):
        return None
    if name.endswith(": action executor"):
        return EXECUTOR
    if name.endswith(": simulation"):
        return SIM
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class DiagnosticsLog:
    """Each source's /diagnostics values (the numeric ones) in the order received, with their receive times."""

    def __init__(self) -> None:
        self._times: dict[str, list[float]] = {}
        self._values: dict[str, list[dict[str, float]]] = {}

    def add(self, source: str, received_s: float, values: Mapping[str, str]) -> None:
        """One report of `source` received at `received_s` (any monotonic clock; one per log)."""
        numbers = {k: n for k, v in values.items() if (n := _number(str(v))) is not None}
        times = self._times.setdefault(source, [])
        if times and received_s < times[-1]:
            raise ValueError(f"{source}: report at {received_s} before the previous one at {times[-1]}")
        times.append(received_s)
        self._values.setdefault(source, []).append(numbers)

    def reported_after(self, source: str, t: float) -> bool:
        """Whether `source` has a report received after `t` (an episode that ended at `t` can be closed)."""
        times = self._times.get(source, [])
        return bool(times) and times[-1] > t

    def before(self, source: str, t: float) -> dict[str, float]:
        """The last report received at or before `t` ({} if none)."""
        times = self._times.get(source, [])
        i = bisect_right(times, t)
        return self._values[source][i - 1] if i else {}

    def after(self, source: str, t: float) -> dict[str, float]:
        """The first report received after `t`, else the last one ({} if none)."""
        times = self._times.get(source, [])
        if not times:
            return {}
        i = bisect_right(times, t)
        return self._values[source][min(i, len(times) - 1)]

    def between(self, source: str, start: float, end: float) -> list[dict[str, float]]:
        """The reports received in [start, end]."""
        times = self._times.get(source, [])
        return self._values.get(source, [])[bisect_left(times, start) : bisect_right(times, end)]

    def counter(self, source: str, key: str, start: float, end: float) -> float:
        """How much a cumulative counter grew from before `start` to the first report after `end`."""
        return max(0.0, self.after(source, end).get(key, 0.0) - self.before(source, start).get(key, 0.0))

    def rejected(
        self, source: str, start: float, end: float, ignore: tuple[str, ...] = ("disabled",)
    ) -> dict[str, int]:
        """Chunks refused during [start, end] by reason (`rejected_<reason>` counters), `ignore`d reasons left out."""
        keys = {k for k in self.after(source, end) if k.startswith("rejected_")}
        out = {k[len("rejected_") :]: int(self.counter(source, k, start, end)) for k in sorted(keys)}
        return {reason: n for reason, n in out.items() if n and reason not in ignore}

    def gauge(self, source: str, key: str, start: float, end: float, worst: str = "max") -> float:
        """The largest (`worst` "max") or smallest ("min", zeros left out) value reported in [start, end]."""
        values = [v[key] for v in self.between(source, start, end) if key in v]
        if worst == "min":
            values = [v for v in values if v > 0]
            return min(values) if values else 0.0
        return max(values) if values else 0.0


def episode_signals(
    log: DiagnosticsLog,
    *,
    start_s: float,
    end_s: float,
    fps: float,
    steps: int,
    steps_before_control: int,
    horizon: int,
    latencies_s: list[float],
    period_s: float = 1.0,
) -> EpisodeSignals:
    """The signals of the episode the executor drove from `start_s` to `end_s` (receive clock of `log`).

    `period_s`: the nodes' diagnostics period; gauges are read up to one period after the end (the report that
    covers the episode's last second).
    """
    import numpy as np

    late = end_s + period_s
    accepted = log.counter(EXECUTOR, "chunks_accepted", start_s, end_s)
    p50, p99 = (float(v) for v in np.percentile(latencies_s, [50, 99])) if latencies_s else (0.0, 0.0)
    return EpisodeSignals(
        fps=fps,
        steps=steps,
        steps_before_control=steps_before_control,
        wall_s=max(0.0, end_s - start_s),
        starvation_s=log.counter(EXECUTOR, "starvation_s", start_s, end_s),
        starvation_events=int(log.counter(EXECUTOR, "starvation_events", start_s, end_s)),
        rate_limited_ticks=int(log.counter(EXECUTOR, "rate_limited_ticks", start_s, end_s)),
        steps_dropped_late=int(log.counter(EXECUTOR, "steps_dropped_late", start_s, end_s)),
        chunk_steps=int(accepted * horizon),
        chunks_rejected=log.rejected(EXECUTOR, start_s, end_s),
        stale_observations=int(log.counter(POLICY, "stale_observations", start_s, end_s)),
        observation_age_max_s=log.gauge(POLICY, "observation_age_s", start_s, late),
        chunk_latency_p50_s=p50,
        chunk_latency_p99_s=p99,
        tick_jitter_p99_ms=log.gauge(EXECUTOR, "tick_jitter_p99_ms", start_s, late),
        sim_real_time_factor_min=log.gauge(SIM, "real_time_factor", start_s, late, worst="min"),
    )


@dataclass
class ProgressWatch:
    """Whether an episode is stuck: its sim clock made no step for `stall_s` wall seconds.

    The time limit of an episode is its own clock (the sim's steps); a sim slower than real time takes longer in
    wall time and is not stuck, so a supervisor must not give up on a wall-clock multiple of the episode length.
    """

    stall_s: float
    _step: int = -1
    _changed_at: float | None = None

    def __post_init__(self) -> None:
        if not self.stall_s > 0:
            raise ValueError(f"stall_s must be > 0, got {self.stall_s}")

    def update(self, step: int, now_s: float) -> None:
        """The newest step count seen at `now_s`."""
        if step != self._step or self._changed_at is None:
            self._step, self._changed_at = step, now_s

    def stuck(self, now_s: float) -> bool:
        if self._changed_at is None:
            self._changed_at = now_s
        return now_s - self._changed_at >= self.stall_s


def cause_counts(rows: list[Mapping[str, Any]]) -> dict[str, int]:
    """Failed episodes per cause (the `cause` of each row that failed)."""
    counts: dict[str, int] = {}
    for row in rows:
        if not row.get("success") and row.get("cause"):
            counts[str(row["cause"])] = counts.get(str(row["cause"]), 0) + 1
    return counts
