"""Resampling timestamped samples onto a fixed-rate frame grid (pure, no ROS, no I/O).

The rule (DESIGN.md section 6, the same as the live recorder and the policy node):

* frame 0 is at or after the first time where every feature has a sample (so frame 0 holds real data), and
  less than one frame period after it: where exactly is the grid phase (`grid_start`): the grid is placed
  just after the stamps of the cameras (features marked `image`) running at the fps, by their phase and
  jitter measured over the first `PHASE_WINDOW_FRAMES` frame periods, so each frame shows each camera's
  newest image instead of, for a camera whose stamps jitter around the grid points, its previous one;
* frame k is at ``t0 + round(k * 1e9 / fps)`` ns (`frame_time`);
* ``hold`` (default): a frame takes, per feature, the newest sample stamped at or before the frame time --
  a sample stamped exactly at the frame time belongs to that frame -- and nothing from the future;
* ``nearest``: the closer of the samples just before/at and just after (ties go to the past one);
* ``linear``: interpolation between those two (vector features only; images fall back to nearest);
* the last frame is at or before the earliest "last sample" over all features;
* a frame whose sample for some feature is older than that feature's `max_age_ns`, or whose samples are
  spread by more than `tolerance_ns`, is dropped and counted;
* equal stamps (`absorb_equal_stamp`, offline and live): a sample stamped exactly like its feature's newest one
  is no new sample. With the same payload it is an exact duplicate (a message recorded twice) and is dropped;
  with another payload the later sample wins (it replaces the newest one). Both are counted per feature
  (``duplicates``, ``equal_stamp_conflicts``) and neither reaches the grid phase, so duplicates cannot make
  frames show their cameras' previous images;
* messages of a feature's topic that could not be used (another type than the contract's, `Aligner.skipped`)
  still count as grid slots where they would have given frames (``frames_dropped_unusable``), so the coverage
  says what was lost.

Samples are pushed in storage order; each topic's stamps must not go backwards. Frames are released as soon
as every feature has a sample after the frame time (or has ended), so memory stays bounded by the reordering
in the bag, not by its length (the per-frame sync record, `SyncReport.per_frame`, keeps 8 bytes per frame and
feature); a topic that falls silent delays frames by at most `max_lag_ns` of the others'
time.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from lerobot_contract.errors import NonMonotonicStampError
from lerobot_contract.time import NS

ALIGN_MODES = ("hold", "nearest", "linear")
# The grid phase is measured over this many frame periods from the first time every feature has a sample.
PHASE_WINDOW_FRAMES = 10
# A camera needs this many stamps in the window, all spaced by about whole frame periods, to set the phase.
PHASE_MIN_SAMPLES = 4
# Grid points sit this many times a camera's largest measured deviation after its mean phase: a window of 10
# stamps shows a camera's usual jitter, not its tail (on a busy machine the synthetic cameras' stamps deviated up
# to ~3 ms in the window and ~9 ms at the 99th percentile later; 2x left 14 of 1288 frames reusing an image, 3x 2).
PHASE_MARGIN = 3.0
# Stamps kept per camera for the phase (a camera that started long before the others keeps its newest ones).
PHASE_MAX_STAMPS = 64


def frame_time(t0_ns: int, k: int, fps: int) -> int:
    """Stamp (ns) of frame `k`: ``t0 + k / fps`` rounded half up to the nanosecond."""
    return t0_ns + (2 * k * NS + fps) // (2 * fps)


@dataclass(frozen=True)
class AlignFeature:
    """Timing rules of one feature."""

    key: str
    max_age_ns: int | None = None
    interpolate: bool = False  # linear mode applies (vectors); otherwise linear degrades to nearest
    # A camera: its stamp phase places the frame grid (`grid_start`) and the report counts its images that
    # frames reused or never used.
    image: bool = False


@dataclass(frozen=True)
class Sample:
    """One timestamped payload (whatever the caller pushes: a vector, raw bytes, ...)."""

    stamp_ns: int
    seq: int
    payload: Any
    index: int = -1  # number of this sample among its feature's samples of the episode (0-based)


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
    image: bool = False
    reused: int = 0  # kept frames holding the same sample as the kept frame before
    unused: int = 0  # samples between two kept frames' picks that no kept frame holds
    last_pick_index: int | None = None
    duplicates: int = 0  # samples dropped as exact duplicates (same stamp, same payload) of the one before
    equal_stamp_conflicts: int = 0  # samples stamped like the one before with another payload (the later one won)
    unusable: int = 0  # messages of the topic that could not be used (`Aligner.skipped`)
    # Per kept frame, when the report records frames (`SyncReport.per_frame`): frame time minus the stamp of the
    # data the frame took (ns), and the numbers of the kept frames (0-based) that held the previous frame's sample.
    frame_skews_ns: array[int] = field(default_factory=lambda: array("q"))
    reused_frames: list[int] = field(default_factory=list)


@dataclass
class SyncReport:
    """What alignment did to one episode."""

    mode: str
    fps: int
    t0_ns: int | None = None
    frames_kept: int = 0
    frames_dropped_stale: int = 0
    frames_dropped_tolerance: int = 0
    frames_dropped_damaged: int = 0  # kept frames whose image could not be decoded after all (`drop_kept_frame`)
    frames_dropped_unusable: int = 0  # grid slots only unusable messages covered (`Aligner.skipped`)
    slots: int = 0
    forced_releases: int = 0
    features: dict[str, FeatureSync] = field(default_factory=dict)
    per_frame: bool = False  # also record each kept frame's skew and reuse per feature (`as_dict()["per_frame"]`)

    @property
    def frames_dropped(self) -> int:
        """All dropped frames."""
        return (
            self.frames_dropped_stale
            + self.frames_dropped_tolerance
            + self.frames_dropped_damaged
            + self.frames_dropped_unusable
        )

    def drop_kept_frame(self) -> None:
        """A frame counted as kept could not be built (an image that passed the checks but does not decode)."""
        self.frames_kept -= 1
        self.frames_dropped_damaged += 1

    @property
    def coverage(self) -> float:
        """Kept frames / grid slots between the first and the last frame time."""
        return self.frames_kept / self.slots if self.slots else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (skews in seconds); with `per_frame`, also ``per_frame``: per feature, each kept
        frame's skew (``skew_ms``, frame time minus the stamp of the data it took, ms to the microsecond) and the
        kept frames that reused the previous frame's sample (``reused_frames``)."""
        out: dict[str, Any] = {
            "align": self.mode,
            "fps": self.fps,
            "start_stamp_s": None if self.t0_ns is None else self.t0_ns / NS,
            "frames": self.frames_kept,
            "frames_dropped": self.frames_dropped,
            "frames_dropped_stale": self.frames_dropped_stale,
            "frames_dropped_tolerance": self.frames_dropped_tolerance,
            "frames_dropped_damaged": self.frames_dropped_damaged,
            "frames_dropped_unusable": self.frames_dropped_unusable,
            "coverage": round(self.coverage, 6),
            "forced_releases": self.forced_releases,
            "features": {
                key: {
                    "samples": f.samples,
                    "max_skew_s": round(f.max_skew_s, 9),
                    "mean_skew_s": round(f.sum_skew_s / self.frames_kept, 9) if self.frames_kept else None,
                    "stale_drops": f.stale_drops,
                    "reused": f.reused,
                    "unused": f.unused,
                    "duplicates": f.duplicates,
                    "equal_stamp_conflicts": f.equal_stamp_conflicts,
                    "unusable": f.unusable,
                }
                for key, f in self.features.items()
            },
            "images": {key: {"reused": f.reused, "unused": f.unused} for key, f in self.features.items() if f.image},
        }
        if self.per_frame:
            out["per_frame"] = {
                key: {"skew_ms": [round(s / 1e6, 3) for s in f.frame_skews_ns], "reused_frames": list(f.reused_frames)}
                for key, f in self.features.items()
            }
        return out


def new_report(mode: str, fps: int, features: Sequence[AlignFeature], per_frame: bool = False) -> SyncReport:
    """An empty report of one episode (`per_frame`: also record each kept frame's skews, see `SyncReport`)."""
    return SyncReport(
        mode=mode, fps=fps, features={f.key: FeatureSync(image=f.image) for f in features}, per_frame=per_frame
    )


def same_payload(a: Any, b: Any) -> bool:
    """True when two sample payloads hold the same data (bytes, numpy arrays, or values that compare)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, (bytes, bytearray, memoryview)) and isinstance(b, (bytes, bytearray, memoryview)):
        return bytes(a) == bytes(b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def absorb_equal_stamp(buf: deque[Sample], stats: FeatureSync, stamp_ns: int, payload: Any) -> bool:
    """True when a sample stamped exactly like its feature's newest one was taken care of (see the module doc):
    an exact duplicate is dropped, another payload replaces the newest sample (the later one wins); counted in
    `stats`. False for any other stamp: the caller adds the sample."""
    if stats.last_stamp_ns is None or stamp_ns != stats.last_stamp_ns:
        return False
    newest = buf[-1] if buf and buf[-1].stamp_ns == stamp_ns else None
    if newest is not None and same_payload(newest.payload, payload):
        stats.duplicates += 1
        return True
    stats.equal_stamp_conflicts += 1
    if newest is not None:
        buf[-1] = Sample(stamp_ns, newest.seq, payload, newest.index)
    return True


def _whole_periods(interval_ns: int, period_ns: float) -> bool:
    """True when an interval between two stamps is about a whole number (>= 1) of frame periods."""
    ratio = interval_ns / period_ns
    return ratio >= 0.75 and abs(ratio - round(ratio)) <= 0.25


def grid_start(stamps: Mapping[str, Sequence[int]], fps: int, first_ns: int | None = None) -> int:
    """Time of frame 0: at or after `first_ns` (default: the latest first stamp), less than a period later.

    `stamps` holds each camera's stamps (ascending); only the ones up to `PHASE_WINDOW_FRAMES` periods after
    `first_ns` count. A camera whose stamps are spaced by about whole frame periods (at least
    `PHASE_MIN_SAMPLES` of them) has a phase (the circular mean of its stamps modulo the period) and a jitter
    (the largest deviation from it); the grid goes `PHASE_MARGIN` jitters after one camera's phase, choosing
    the camera for which no camera's stamps come within its margin before a grid point and the oldest image a
    frame holds is the newest. Without such a camera frame 0 is at `first_ns`. The bag aligner and the live
    sampler both call this, so a recording and a bag of it get the same grid.
    """
    if first_ns is None:
        first_ns = max(values[0] for values in stamps.values() if values)
    period = NS / fps
    window_end = first_ns + PHASE_WINDOW_FRAMES * NS // fps
    phases: list[tuple[float, float]] = []  # (phase after first_ns, margin), ns
    for values in stamps.values():
        used = [t for t in values if t <= window_end]
        if len(used) < PHASE_MIN_SAMPLES:
            continue
        if not all(_whole_periods(b - a, period) for a, b in pairwise(used)):
            continue
        angles = [2 * math.pi * ((t - first_ns) % period) / period for t in used]
        mean = math.atan2(sum(map(math.sin, angles)), sum(map(math.cos, angles)))
        phase = (mean / (2 * math.pi) * period) % period
        jitter = max(abs((((t - first_ns) - phase + period / 2) % period) - period / 2) for t in used)
        jitter = max(0.0, jitter - 0.5)  # stamps on an exact fps grid deviate by up to 0.5 ns (ns rounding)
        phases.append((phase, min(PHASE_MARGIN * jitter, period / 2)))
    if not phases:
        return first_ns
    best: tuple[int, float, float] | None = None
    for phase, margin in phases:
        theta = (phase + margin) % period
        lags = [((theta - p) % period, m) for p, m in phases]
        # A lag within 1 ns of the margin is the candidate's own (float rounding), not a violation.
        late = sum(lag < m - 1.0 for lag, m in lags)
        score = (late, max(lag for lag, _ in lags), theta)
        if best is None or score < best:
            best = score
    assert best is not None
    theta = best[2]
    if theta > period - 1.0:
        theta -= period  # within float rounding of a whole period: the grid point is at `first_ns` itself
    return first_ns + min(max(0, math.ceil(theta)), NS // fps)


class GridPhase:
    """Collects the cameras' first stamps of an episode until the grid phase can be chosen (`grid_start`).

    The phase can be chosen once every feature has a sample and each camera either has a sample after the
    measuring window, or cannot set the phase (an interval that is not about whole frame periods), or has
    ended; callers may force the choice earlier (a silent topic) with what is there.
    """

    def __init__(self, features: Sequence[AlignFeature], fps: int) -> None:
        self.fps = fps
        self.first: dict[str, int] = {}
        self.keys = [f.key for f in features]
        self._stamps: dict[str, deque[int]] = {f.key: deque(maxlen=PHASE_MAX_STAMPS) for f in features if f.image}
        self._irregular: set[str] = set()
        self._after: set[str] = set()

    @property
    def first_ns(self) -> int | None:
        """The first time every feature has a sample (None until then)."""
        if len(self.first) < len(self.keys):
            return None
        return max(self.first.values())

    @property
    def window_end_ns(self) -> int | None:
        """The end of the phase-measuring window (None until every feature has a sample)."""
        first = self.first_ns
        return None if first is None else first + PHASE_WINDOW_FRAMES * NS // self.fps

    def add(self, key: str, stamp_ns: int) -> None:
        """A sample of `key` (stamps of one key ascending)."""
        self.first.setdefault(key, stamp_ns)
        stamps = self._stamps.get(key)
        if stamps is None or key in self._irregular or key in self._after:
            return
        end = self.window_end_ns
        if end is not None and stamp_ns > end:
            self._after.add(key)
            return
        if stamps and not _whole_periods(stamp_ns - stamps[-1], NS / self.fps):
            self._irregular.add(key)  # grid_start would not use it either
        stamps.append(stamp_ns)

    def ready(self, ended: Collection[str] = ()) -> bool:
        """True once the window holds everything `grid_start` will use."""
        end = self.window_end_ns
        if end is None:
            return False
        for key, stamps in self._stamps.items():
            if key in self._irregular or key in self._after or key in ended:
                continue
            if stamps and stamps[-1] > end:
                continue
            return False
        return True

    def waiting(self) -> list[str]:
        """Cameras whose window is not complete yet."""
        end = self.window_end_ns
        return [
            key
            for key, stamps in self._stamps.items()
            if key not in self._irregular and key not in self._after and not (stamps and end and stamps[-1] > end)
        ]

    def choose(self) -> int:
        """Time of frame 0 (needs every feature to have a sample)."""
        first = self.first_ns
        assert first is not None, "the grid needs a sample of every feature"
        regular = {k: list(v) for k, v in self._stamps.items() if k not in self._irregular and v}
        return grid_start(regular, self.fps, first)


class Aligner:
    """Streaming resampler for one episode (see the module docstring)."""

    def __init__(
        self,
        features: Sequence[AlignFeature],
        fps: int,
        mode: str = "hold",
        tolerance_ns: int | None = None,
        max_lag_ns: int = 2 * NS,
        per_frame: bool = False,
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
        self._phase = GridPhase(features, fps)
        self.report = new_report(mode, fps, features, per_frame)
        # Per feature, the first and last stamps of its topic's messages that could not be used (`skipped`).
        self._skipped: dict[str, tuple[int, int]] = {}

    def push(self, key: str, stamp_ns: int, payload: Any) -> Iterator[AlignedFrame]:
        """Add a sample; yields the frames it completes."""
        stats = self.report.features[key]
        if stats.last_stamp_ns is not None and stamp_ns < stats.last_stamp_ns:
            raise NonMonotonicStampError(
                f"{key}: stamp {stamp_ns / NS:.9f} s comes after {stats.last_stamp_ns / NS:.9f} s "
                f"(goes back {(stats.last_stamp_ns - stamp_ns) / NS:.6f} s)"
            )
        if absorb_equal_stamp(self._buffers[key], stats, stamp_ns, payload):
            return
        if stats.first_stamp_ns is None:
            stats.first_stamp_ns = stamp_ns
        stats.last_stamp_ns = stamp_ns
        stats.samples += 1
        self._seq += 1
        self._buffers[key].append(Sample(stamp_ns, self._seq, payload, stats.samples - 1))
        self._phase.add(key, stamp_ns)
        yield from self._release()

    def _start_grid(self) -> bool:
        """Choose frame 0's time once the grid phase is measured (or a silent camera forces it); True when set."""
        if self._t0 is not None:
            return True
        first = self._phase.first_ns
        if first is None:
            return False
        self._trim(first)  # frame 0 is at or after `first`: older samples but the newest one are not needed
        if not self._phase.ready(self._ended):
            newest = max(b[-1].stamp_ns for b in self._buffers.values() if b)
            waiting = self._phase.waiting()
            behind = [self._buffers[k][-1].stamp_ns for k in waiting if self._buffers[k]]
            if not behind or newest - min(behind) <= self.max_lag_ns:
                return False
            self.report.forced_releases += 1  # a camera fell silent inside the window: choose with what is there
        self._t0 = self._phase.choose()
        self.report.t0_ns = self._t0
        return True

    def skipped(self, key: str, stamp_ns: int) -> None:
        """A message of `key`'s topic stamped `stamp_ns` could not be used (another type than the contract's).

        Nothing is aligned from it, but once every feature has ended, the grid slots such messages would have
        extended the episode by (before its first frame, after its last) count as dropped
        (``frames_dropped_unusable``), so the coverage is not reported as full when they cut the episode short.
        """
        self.report.features[key].unusable += 1
        first, last = self._skipped.get(key, (stamp_ns, stamp_ns))
        self._skipped[key] = (min(first, stamp_ns), max(last, stamp_ns))

    def end(self, key: str) -> Iterator[AlignedFrame]:
        """No more samples will come for `key`; yields the frames this completes."""
        if key in self._ended:
            return
        self._ended.add(key)
        yield from self._release()
        if self.finished:
            self._count_unusable_slots()

    def _count_unusable_slots(self) -> None:
        """The grid slots outside the frames that only unusable messages of some feature covered (`skipped`)."""
        report = self.report
        if self._t0 is None or not self._skipped:
            return
        starts, ends = [], []
        for key, stats in report.features.items():
            if stats.first_stamp_ns is None or stats.last_stamp_ns is None:
                return
            first, last = self._skipped.get(key, (stats.first_stamp_ns, stats.last_stamp_ns))
            starts.append(min(stats.first_stamp_ns, first))
            ends.append(max(stats.last_stamp_ns, last))
        would_start, would_end = max(starts), min(ends)
        extra = 0
        k = report.slots
        while frame_time(self._t0, k, self.fps) <= would_end:
            k += 1
            extra += 1
        k = -1
        while frame_time(self._t0, k, self.fps) >= would_start:
            k -= 1
            extra += 1
        report.slots += extra
        report.frames_dropped_unusable += extra

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
        if not self._start_grid():
            return
        assert self._t0 is not None
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
        trim_buffers(self._buffers.values(), next_t)

    def _check(self, slot: int, t: int, picks: dict[str, Pick]) -> AlignedFrame | None:
        return check_frame(self.report, self.features, self.tolerance_ns, slot, t, picks)


def trim_buffers(buffers: Iterable[deque[Sample]], next_t: int) -> None:
    """Forget samples no later frame can use (keep the newest one at or before `next_t`); offline and live."""
    for buf in buffers:
        while len(buf) >= 2 and buf[1].stamp_ns <= next_t:
            buf.popleft()


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
        index = (pick.after or pick.sample).index
        if report.per_frame:
            fs.frame_skews_ns.append(t - pick.stamp_ns)
        if fs.last_pick_index is not None and index >= 0:
            if index == fs.last_pick_index:
                fs.reused += 1
                if report.per_frame:
                    fs.reused_frames.append(report.frames_kept - 1)
            else:
                fs.unused += max(0, index - fs.last_pick_index - 1)
        fs.last_pick_index = index
    return AlignedFrame(slot, t, picks)
