"""When to start the next inference, and whether an observation may be used (pure; times in nanoseconds).

LeRobot's async inference starts a new inference when the fraction of the current chunk left falls under
`chunk_size_threshold`. A fixed fraction starves the robot when inference is slower than that fraction of
the chunk, and wastes compute when it is much faster. Here the threshold adapts: the next inference starts
when the time left in the last published chunk is no more than the expected inference time (a high
percentile of the recent measurements) plus a margin, or when the fraction left reaches `threshold`,
whichever comes first. Inference that takes longer than the chunk cannot keep the executor fed; it then
runs back to back and the executor reports the starvation.

One inference at a time keeps the executor fed while inference takes at most about half the chunk (the next
chunk must arrive before the current one ends, and it can only start once the current one has arrived).
Up to `max_in_flight` inferences may overlap (the node's `inference_workers`): with enough of them the
limit becomes the chunk itself, provided the device has the throughput (remote servers, GPU queues).

Observations are never dropped for looking similar to the previous one (LeRobot's filter): every inference
takes the newest complete observation, provided it is fresh (not older than `max_observation_age_s`), not
from the future (clock skew), and newer than the one the previous inference used.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import Enum

import numpy as np

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import PolicyConfigError


class ObservationVerdict(str, Enum):
    """Whether an observation may be used for inference now."""

    OK = "ok"
    STALE = "stale"
    FUTURE = "future"
    ALREADY_USED = "already_used"


@dataclass(frozen=True)
class SchedulerConfig:
    """`threshold`: fraction of the chunk left at which inference starts at the latest (LeRobot's
    chunk_size_threshold); `margin_s`: slack added to the expected inference time; `percentile` of the
    last `window` inference times is the expected one."""

    threshold: float = 0.5
    margin_s: float = 0.03
    max_observation_age_s: float = 0.2
    future_tolerance_s: float = 0.05
    percentile: float = 90.0
    window: int = 20

    def __post_init__(self) -> None:
        if not (0.0 <= self.threshold <= 1.0):
            raise PolicyConfigError(f"threshold: must be in [0, 1], got {self.threshold}")
        for name in ("margin_s", "future_tolerance_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise PolicyConfigError(f"{name}: must be a finite number >= 0, got {value}")
        if not (math.isfinite(self.max_observation_age_s) and self.max_observation_age_s > 0):
            raise PolicyConfigError(f"max_observation_age_s: must be > 0, got {self.max_observation_age_s}")
        if not (0.0 < self.percentile <= 100.0):
            raise PolicyConfigError(f"percentile: must be in (0, 100], got {self.percentile}")
        if self.window < 1:
            raise PolicyConfigError(f"window: must be >= 1, got {self.window}")


@dataclass(frozen=True)
class PublishedChunk:
    """What the executor was last given: step k at ``stamp_ns + k * period_ns``, k < horizon."""

    stamp_ns: int
    period_ns: int
    horizon: int

    @property
    def end_ns(self) -> int:
        return self.stamp_ns + (self.horizon - 1) * self.period_ns


class InferenceScheduler:
    """See the module docstring. Not thread-safe: the caller serialises calls (one lock in the node)."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self._durations: deque[float] = deque(maxlen=config.window)
        self._last: PublishedChunk | None = None
        self._in_flight: dict[int, PublishedChunk] = {}
        self._last_observation_ns: int | None = None
        self.inferences = 0
        self.total_inference_s = 0.0

    @property
    def last_chunk(self) -> PublishedChunk | None:
        """The chunk published last (None before the first)."""
        return self._last

    @property
    def in_flight(self) -> int:
        """Inferences started and not finished."""
        return len(self._in_flight)

    @property
    def expected_inference_s(self) -> float:
        """The `percentile` of recent inference times (0 before the first measurement)."""
        if not self._durations:
            return 0.0
        return float(np.percentile(np.array(self._durations), self.config.percentile))

    @property
    def mean_inference_s(self) -> float:
        """Mean of every measured inference time."""
        return self.total_inference_s / self.inferences if self.inferences else 0.0

    def record_inference(self, duration_s: float) -> None:
        """Add a measured inference time (seconds, wall clock), e.g. of a warm-up run that published nothing."""
        if math.isfinite(duration_s) and duration_s >= 0:
            self._durations.append(duration_s)
            self.inferences += 1
            self.total_inference_s += duration_s

    def inference_started(self, observation_ns: int, period_ns: int, horizon: int) -> None:
        """An inference on the observation at `observation_ns` began; its chunk is expected to cover
        ``horizon`` steps of `period_ns` from there."""
        self._in_flight[observation_ns] = PublishedChunk(observation_ns, period_ns, horizon)
        self._last_observation_ns = observation_ns

    def inference_finished(self, observation_ns: int, duration_s: float, published: bool) -> None:
        """The inference begun on `observation_ns` ended after `duration_s` (wall clock); `published`: its chunk
        went to the executor (False: it failed, and the coverage it promised is withdrawn)."""
        expected = self._in_flight.pop(observation_ns, None)
        self.record_inference(duration_s)
        if published and expected is not None and (self._last is None or expected.end_ns >= self._last.end_ns):
            self._last = expected

    def reset(self) -> None:
        """Forget published chunks and used observations (episode start, clock jump); keep timings."""
        self._last = None
        self._in_flight.clear()
        self._last_observation_ns = None

    def lead_time_s(self, horizon: int, period_ns: int) -> float:
        """Time left in a chunk at which the next inference starts: the adapted threshold, in seconds."""
        by_fraction = self.config.threshold * horizon * period_ns / NS
        return max(by_fraction, self.expected_inference_s + self.config.margin_s)

    def threshold_steps(self, horizon: int, period_ns: int) -> int:
        """`lead_time_s` in chunk steps (for the status)."""
        return min(horizon, math.ceil(self.lead_time_s(horizon, period_ns) * NS / period_ns))

    def covered_until_ns(self) -> int | None:
        """End of the newest chunk published or expected from an inference in flight (None: nothing)."""
        ends = [c.end_ns for c in self._in_flight.values()]
        if self._last is not None:
            ends.append(self._last.end_ns)
        return max(ends) if ends else None

    def remaining_s(self, now_ns: int) -> float:
        """Time until the last published chunk runs out (0 when there is none)."""
        if self._last is None:
            return 0.0
        return max(self._last.end_ns - now_ns, 0) / NS

    def remaining_steps(self, now_ns: int) -> int:
        """Steps of the last published chunk stamped at or after `now_ns`."""
        last = self._last
        if last is None or now_ns > last.end_ns:
            return 0
        if now_ns <= last.stamp_ns:
            return last.horizon
        return last.horizon - -(-(now_ns - last.stamp_ns) // last.period_ns)

    def start_at_ns(self) -> int | None:
        """The time at which the next inference should start (None: at once)."""
        end = self.covered_until_ns()
        if end is None:
            return None
        newest = max([*self._in_flight.values(), *([self._last] if self._last else [])], key=lambda c: c.end_ns)
        return end - int(self.lead_time_s(newest.horizon, newest.period_ns) * NS)

    def should_start(self, now_ns: int, max_in_flight: int = 1) -> bool:
        """True when the next inference is due and fewer than `max_in_flight` are running."""
        if len(self._in_flight) >= max_in_flight:
            return False
        start = self.start_at_ns()
        return start is None or now_ns >= start

    def check_observation(self, observation_ns: int, now_ns: int) -> ObservationVerdict:
        """May the observation stamped `observation_ns` be used at `now_ns`?"""
        age = (now_ns - observation_ns) / NS
        if -age > self.config.future_tolerance_s:
            return ObservationVerdict.FUTURE
        if age > self.config.max_observation_age_s:
            return ObservationVerdict.STALE
        if self._last_observation_ns is not None and observation_ns <= self._last_observation_ns:
            return ObservationVerdict.ALREADY_USED
        return ObservationVerdict.OK
