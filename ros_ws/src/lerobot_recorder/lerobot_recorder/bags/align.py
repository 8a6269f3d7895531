"""Resampling timestamped samples onto a fixed-rate frame grid (pure, no ROS, no I/O).

The rule (DESIGN.md section 6, the same as the live recorder and the policy node):

* frame 0 is at the first time where every feature has a sample (so frame 0 holds real data);
* frame k is at ``t0 + round(k * 1e9 / fps)`` ns (`frame_time`);
* ``hold`` (default): a frame takes, per feature, the newest sample stamped at or before the frame time --
  a sample stamped exactly at the frame time belongs to that frame -- and nothing from the future;
* ``nearest``: the closer of the samples just before/at and just after (ties go to the past one);
* ``linear``: interpolation between those two (vector features only; images fall back to nearest);
* the last frame is at or before the earliest "last sample" over all features;
* a frame whose sample for some feature is older than that feature's `max_age_ns`, or whose samples are
  spread by more than `tolerance_ns`, is dropped and counted.

Samples are pushed in storage order; each topic's stamps must not go backwards. Frames are released as soon
as every feature has a sample after the frame time (or has ended), so memory stays bounded by the reordering
in the bag, not by its length; a topic that falls silent delays frames by at most `max_lag_ns` of the others'
time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lerobot_recorder.bags.errors import NonMonotonicStampError

ALIGN_MODES = ("hold", "nearest", "linear")
NS = 1_000_000_000


def frame_time(t0_ns: int, k: int, fps: int) -> int:
    """Stamp (ns) of frame `k`: ``t0 + k / fps`` rounded half up to the nanosecond."""
    return t0_ns + (2 * k * NS + fps) // (2 * fps)


@dataclass(frozen=True)
class AlignFeature:
    """Timing rules of one feature."""

    key: str
    max_age_ns: int | None = None
    interpolate: bool = False  # linear mode applies (vectors); otherwise linear degrades to nearest


@dataclass(frozen=True)
class Sample:
    """One timestamped payload (whatever the caller pushes: a vector, raw bytes, ...)."""

    stamp_ns: int
    seq: int
    payload: Any


@dataclass(frozen=True)
class Pick:
    """What a frame takes from one feature: `sample`, or a blend of `sample` and `after` by `alpha`."""

    sample: Sample
    after: Sample | None = None
    alpha: float = 0.0

    @property
    def stamp_ns(self) -> int:
        """The effective stamp of the picked data."""
        if self.after is None:
            return self.sample.stamp_ns
        return round(self.sample.stamp_ns + self.alpha * (self.after.stamp_ns - self.sample.stamp_ns))


@dataclass(frozen=True)
class AlignedFrame:
    """A frame that passed the checks: slot number on the grid, its time, and one pick per feature."""

    slot: int
    time_ns: int
    picks: dict[str, Pick]


@dataclass
class FeatureSync:
    """Per-feature statistics for the sync report."""

    samples: int = 0
    max_skew_s: float = 0.0
    sum_skew_s: float = 0.0
    stale_drops: int = 0
    first_stamp_ns: int | None = None
    last_stamp_ns: int | None = None


@dataclass
class SyncReport:
    """What alignment did to one episode."""

    mode: str
    fps: int
    t0_ns: int | None = None
    frames_kept: int = 0
    frames_dropped_stale: int = 0
    frames_dropped_tolerance: int = 0
    slots: int = 0
    forced_releases: int = 0
    features: dict[str, FeatureSync] = field(default_factory=dict)

    @property
    def frames_dropped(self) -> int:
        """All dropped frames."""
        return self.frames_dropped_stale + self.frames_dropped_tolerance

    @property
    def coverage(self) -> float:
        """Kept frames / grid slots between the first and the last frame time."""
        return self.frames_kept / self.slots if self.slots else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (skews in seconds)."""
        return {
            "align": self.mode,
            "fps": self.fps,
            "start_stamp_s": None if self.t0_ns is None else self.t0_ns / NS,
            "frames": self.frames_kept,
            "frames_dropped": self.frames_dropped,
            "frames_dropped_stale": self.frames_dropped_stale,
            "frames_dropped_tolerance": self.frames_dropped_tolerance,
            "coverage": round(self.coverage, 6),
            "forced_releases": self.forced_releases,
            "features": {
                key: {
                    "samples": f.samples,
                    "max_skew_s": round(f.max_skew_s, 9),
                    "mean_skew_s": round(f.sum_skew_s / self.frames_kept, 9) if self.frames_kept else None,
                    "stale_drops": f.stale_drops,
                }
                for key, f in self.features.items()
            },
        }


class Aligner:
    """Streaming resampler for one episode (see the module docstring)."""

    def __init__(
        self,
        features: Sequence[AlignFeature],
        fps: int,
        mode: str = "hold",
        tolerance_ns: int | None = None,
        max_lag_ns: int = 2 * NS,
    ) -> None:
        if mode not in ALIGN_MODES:
            raise ValueError(f"align mode must be one of {ALIGN_MODES}, got {mode!r}")
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        if not features:
            raise ValueError("at least one feature is needed")
        self.features = {f.key: f for f in features}
        self.fps = fps
        self.mode = mode
        self.tolerance_ns = tolerance_ns
        self.max_lag_ns = max_lag_ns
        self._buffers: dict[str, deque[Sample]] = {f.key: deque() for f in features}
        self._seq = 0
        self._next_slot = 0
        self._t0: int | None = None
        self._ended: set[str] = set()
        self.report = SyncReport(mode=mode, fps=fps, features={f.key: FeatureSync() for f in features})

    def push(self, key: str, stamp_ns: int, payload: Any) -> Iterator[AlignedFrame]:
        """Add a sample; yields the frames it completes."""
        stats = self.report.features[key]
        if stats.last_stamp_ns is not None and stamp_ns < stats.last_stamp_ns:
            raise NonMonotonicStampError(
                f"{key}: stamp {stamp_ns / NS:.9f} s comes after {stats.last_stamp_ns / NS:.9f} s "
                f"(goes back {(stats.last_stamp_ns - stamp_ns) / NS:.6f} s)"
            )
        if stats.first_stamp_ns is None:
            stats.first_stamp_ns = stamp_ns
        stats.last_stamp_ns = stamp_ns
        stats.samples += 1
        self._seq += 1
        self._buffers[key].append(Sample(stamp_ns, self._seq, payload))
        if self._t0 is None:
            if any(f.first_stamp_ns is None for f in self.report.features.values()):
                return
            self._t0 = max(f.first_stamp_ns or 0 for f in self.report.features.values())
            self.report.t0_ns = self._t0
        yield from self._release()

    def end(self, key: str) -> Iterator[AlignedFrame]:
        """No more samples will come for `key`; yields the frames this completes."""
        if key in self._ended:
            return
        self._ended.add(key)
        yield from self._release()

    def finish(self) -> Iterator[AlignedFrame]:
        """End of data for every feature: yields the remaining frames up to the earliest last sample."""
        for key in self.features:
            yield from self.end(key)

    def poll(self) -> Iterator[AlignedFrame]:
        """Frames that are complete with the samples pushed so far."""
        yield from self._release()

    @property
    def finished(self) -> bool:
        """True once every feature has ended."""
        return len(self._ended) == len(self.features)

    def _release(self) -> Iterator[AlignedFrame]:
        if self._t0 is None:
            return
        while True:
            t = frame_time(self._t0, self._next_slot, self.fps)
            ended = [self.report.features[k].last_stamp_ns or 0 for k in self._ended]
            if ended and t > min(ended):
                return  # past the last sample of a feature that has ended
            # A feature still streaming may deliver a sample at or before t: wait for it.
            if any(k not in self._ended and b[-1].stamp_ns <= t for k, b in self._buffers.items()):
                if max(b[-1].stamp_ns for b in self._buffers.values()) - t <= self.max_lag_ns:
                    return
                # One topic has fallen silent while others run ahead by more than max_lag: release with what
                # is there (bounds memory by time, not by bag length).
                self.report.forced_releases += 1
            picks = self._picks(t)
            slot = self._next_slot
            self._next_slot += 1
            self._trim(frame_time(self._t0, self._next_slot, self.fps))
            if picks is None:
                continue
            if (frame := self._check(slot, t, picks)) is not None:
                yield frame

    def _picks(self, t: int) -> dict[str, Pick] | None:
        picks: dict[str, Pick] = {}
        for key, buf in self._buffers.items():
            before: Sample | None = None
            after: Sample | None = None
            for sample in buf:
                if sample.stamp_ns <= t:
                    before = sample
                else:
                    after = sample
                    break
            if before is None:
                return None  # only after a forced release: this feature has nothing yet
            picks[key] = self._pick(self.features[key], t, before, after)
        return picks

    def _pick(self, feat: AlignFeature, t: int, before: Sample, after: Sample | None) -> Pick:
        if self.mode == "hold" or after is None or before.stamp_ns == t:
            return Pick(before)
        if self.mode == "linear" and feat.interpolate:
            alpha = (t - before.stamp_ns) / (after.stamp_ns - before.stamp_ns)
            return Pick(before, after, alpha)
        return Pick(after) if after.stamp_ns - t < t - before.stamp_ns else Pick(before)

    def _trim(self, next_t: int) -> None:
        """Forget samples no later frame can use (keep the newest one at or before `next_t`)."""
        for buf in self._buffers.values():
            while len(buf) >= 2 and buf[1].stamp_ns <= next_t:
                buf.popleft()

    def _check(self, slot: int, t: int, picks: dict[str, Pick]) -> AlignedFrame | None:
        return check_frame(self.report, self.features, self.tolerance_ns, slot, t, picks)


def check_frame(
    report: SyncReport,
    features: dict[str, AlignFeature],
    tolerance_ns: int | None,
    slot: int,
    t: int,
    picks: dict[str, Pick],
) -> AlignedFrame | None:
    """Keep the frame at time `t` or drop it (stale input, inputs too far apart), counting either in `report`.

    Shared by the offline `Aligner` and the live recorder's sampler so both apply one rule.
    """
    report.slots = slot + 1
    stale = False
    for key, pick in picks.items():
        limit = features[key].max_age_ns
        # Staleness: how old the newest real information is (for blends, the sample before t).
        if limit is not None and t - pick.sample.stamp_ns > limit:
            report.features[key].stale_drops += 1
            stale = True
    if stale:
        report.frames_dropped_stale += 1
        return None
    stamps = [p.stamp_ns for p in picks.values()]
    if tolerance_ns is not None and max(stamps) - min(stamps) > tolerance_ns:
        report.frames_dropped_tolerance += 1
        return None
    report.frames_kept += 1
    for key, pick in picks.items():
        skew = abs(t - pick.stamp_ns) / NS
        fs = report.features[key]
        fs.max_skew_s = max(fs.max_skew_s, skew)
        fs.sum_skew_s += skew
    return AlignedFrame(slot, t, picks)
