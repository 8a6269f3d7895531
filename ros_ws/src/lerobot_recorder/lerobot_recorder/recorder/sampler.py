"""Live sampling: the newest message per feature onto the dataset's frame grid, as messages arrive.

The rule is the bag converter's (`lerobot_recorder.bags.align`, DESIGN.md section 6), applied live:

* an episode starts at `start_ns`; samples stamped before it are ignored, and frame 0 is at the first time
  where every feature has a sample (the latest of the features' first stamps), so frame 0 holds real data;
* frame k is at ``frame_time(t0, k, fps)``; it takes, per feature, the newest sample stamped at or before the
  frame time (a sample stamped exactly at the frame time belongs to that frame) and nothing from the future;
* a frame whose sample for some feature is older than that feature's `max_age_ns`, or whose samples are spread
  by more than `tolerance_ns`, is dropped and counted -- never filled in.

Live, a frame cannot wait for the future forever: frame t is sampled as soon as every feature has a sample
stamped after t (nothing at or before t can still come, stamps being monotonic per topic), or once the clock
reaches ``t + latency_ns`` (a topic has paused; its frame is then judged by `max_age_ns`). The clock is read
through the smallest receive-minus-stamp offset seen in the episode, so stamps on another clock than the
recorder's (a device clock, sim time) still work. A sample that arrives after its frame was sampled is
counted as late. Recording a bag of the same stream and converting it
with ``bag2dataset --split marker:...`` (markers at the episode starts) gives the same frames.

Memory is bounded: per feature only the newest sample at or before the next frame time and the ones after it
are kept, and at most `max_samples` of them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lerobot_recorder.bags.align import (
    NS,
    AlignedFrame,
    AlignFeature,
    FeatureSync,
    Pick,
    Sample,
    SyncReport,
    check_frame,
    frame_time,
)
from lerobot_recorder.recorder.errors import ClockJumpError


@dataclass
class LiveStats:
    """What only live sampling can see (per episode)."""

    late_samples: int = 0
    out_of_order: int = 0
    overflow: int = 0
    ignored_before_start: int = 0
    late_by_feature: dict[str, int] = field(default_factory=dict)


class LiveSampler:
    """Samples one episode at a time onto the frame grid (see the module docstring); not thread-safe."""

    def __init__(
        self,
        features: Sequence[AlignFeature],
        fps: int,
        *,
        tolerance_ns: int | None = None,
        latency_ns: int = 50_000_000,
        clock_jump_ns: int = NS,
        max_samples: int = 256,
    ) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        if not features:
            raise ValueError("at least one feature is needed")
        if latency_ns < 0:
            raise ValueError(f"latency_ns must be >= 0, got {latency_ns}")
        if max_samples < 2:
            raise ValueError(f"max_samples must be >= 2, got {max_samples}")
        self.features = {f.key: f for f in features}
        self.fps = fps
        self.tolerance_ns = tolerance_ns
        self.latency_ns = latency_ns
        self.clock_jump_ns = clock_jump_ns
        self.max_samples = max_samples
        self._buffers: dict[str, deque[Sample]] = {k: deque() for k in self.features}
        self._last_stamp: dict[str, int] = {}
        self._last_now: int | None = None
        self._offset: int | None = None
        self._seq = 0
        self._start_ns: int | None = None
        self._t0: int | None = None
        self._next_slot = 0
        self.report = self._new_report()
        self.live = LiveStats()

    def _new_report(self) -> SyncReport:
        return SyncReport(mode="hold", fps=self.fps, features={k: FeatureSync() for k in self.features})

    @property
    def active(self) -> bool:
        """True between `start` and `stop`."""
        return self._start_ns is not None

    @property
    def t0_ns(self) -> int | None:
        """Time of frame 0 (None until every feature has a sample in this episode)."""
        return self._t0

    @property
    def waiting_for(self) -> list[str]:
        """Features without a sample yet in this episode (frame 0 waits for them)."""
        return [k for k, f in self.report.features.items() if f.first_stamp_ns is None]

    @property
    def silent(self) -> list[str]:
        """Features that never had a sample since the sampler was made (episode or not)."""
        return [k for k in self.features if k not in self._last_stamp]

    def start(self, start_ns: int) -> int:
        """Begin an episode at clock time `start_ns`; returns the start on the stamps' clock.

        Samples stamped before the returned time are not used (it equals `start_ns` when the stamps are on the
        recorder's clock, up to the smallest transport delay seen).
        """
        self._start_ns = start_ns - (self._offset or 0)
        self._last_now = None
        self._t0 = None
        self._next_slot = 0
        for buf in self._buffers.values():
            buf.clear()
        self.report = self._new_report()
        self.live = LiveStats()
        return self._start_ns

    def push(self, key: str, stamp_ns: int, payload: Any, receive_ns: int | None = None) -> None:
        """Add a sample of feature `key` (received at clock time `receive_ns`, when known).

        Raises ClockJumpError when the feature's stamps went back by more than `clock_jump_ns`.
        """
        last = self._last_stamp.get(key)
        if last is not None and stamp_ns < last:
            if last - stamp_ns > self.clock_jump_ns:
                self._last_stamp[key] = stamp_ns
                self._offset = None
                if self._start_ns is None:
                    return  # between episodes a reset clock is expected (sim resets)
                raise ClockJumpError(
                    f"{key}: stamp {stamp_ns / NS:.3f} s is {(last - stamp_ns) / NS:.3f} s before the previous one "
                    f"({last / NS:.3f} s): the clock was reset"
                )
            self.live.out_of_order += 1
            return
        self._last_stamp[key] = stamp_ns
        if receive_ns is not None:
            offset = receive_ns - stamp_ns
            self._offset = offset if self._offset is None else min(self._offset, offset)
        if self._start_ns is None:
            return
        if stamp_ns < self._start_ns:
            self.live.ignored_before_start += 1
            return
        stats = self.report.features[key]
        if self._t0 is not None and stamp_ns <= frame_time(self._t0, self._next_slot - 1, self.fps):
            self.live.late_samples += 1
            self.live.late_by_feature[key] = self.live.late_by_feature.get(key, 0) + 1
        if stats.first_stamp_ns is None:
            stats.first_stamp_ns = stamp_ns
        stats.last_stamp_ns = stamp_ns
        stats.samples += 1
        self._seq += 1
        buf = self._buffers[key]
        buf.append(Sample(stamp_ns, self._seq, payload))
        if len(buf) > self.max_samples:
            buf.popleft()
            self.live.overflow += 1
        if self._t0 is None and not self.waiting_for:
            self._t0 = max(f.first_stamp_ns or 0 for f in self.report.features.values())
            self.report.t0_ns = self._t0

    def poll(self, now_ns: int) -> list[AlignedFrame]:
        """Frames that can be sampled at clock time `now_ns` (kept ones only; drops are counted in `report`)."""
        if self._last_now is not None and now_ns < self._last_now - self.clock_jump_ns:
            back = (self._last_now - now_ns) / NS
            self._last_now = now_ns
            self._offset = None
            raise ClockJumpError(f"the clock went back {back:.3f} s (from a sim reset or a time source change)")
        self._last_now = now_ns if self._last_now is None else max(self._last_now, now_ns)
        stamp_now = now_ns - (self._offset or 0)
        return self._release(lambda t: stamp_now >= t + self.latency_ns)

    def stop(self, end_ns: int) -> list[AlignedFrame]:
        """End the episode at clock time `end_ns`: the remaining frames, up to the earliest last sample."""
        frames: list[AlignedFrame] = []
        if self._t0 is not None:
            last = min(f.last_stamp_ns or 0 for f in self.report.features.values())
            limit = min(last, end_ns - (self._offset or 0))
            frames = self._release(lambda t: t <= limit, stop_at=limit)
        self._start_ns = None
        for buf in self._buffers.values():
            buf.clear()
        return frames

    def _release(self, due: Callable[[int], bool], stop_at: int | None = None) -> list[AlignedFrame]:
        out: list[AlignedFrame] = []
        if self._t0 is None:
            return out
        while True:
            t = frame_time(self._t0, self._next_slot, self.fps)
            if stop_at is not None and t > stop_at:
                break
            complete = all(buf and buf[-1].stamp_ns > t for buf in self._buffers.values())
            if not (complete or due(t)):
                break
            picks = self._picks(t)
            slot = self._next_slot
            self._next_slot += 1
            self._trim(frame_time(self._t0, self._next_slot, self.fps))
            if picks is None:
                # The buffer cap threw away the sample this frame needed (sampling fell far behind): a drop.
                self.report.slots = slot + 1
                self.report.frames_dropped_stale += 1
            elif (frame := self._check(slot, t, picks)) is not None:
                out.append(frame)
        return out

    def _picks(self, t: int) -> dict[str, Pick] | None:
        picks: dict[str, Pick] = {}
        for key, buf in self._buffers.items():
            before = None
            for sample in buf:
                if sample.stamp_ns > t:
                    break
                before = sample
            if before is None:
                return None
            picks[key] = Pick(before)
        return picks

    def _trim(self, next_t: int) -> None:
        for buf in self._buffers.values():
            while len(buf) >= 2 and buf[1].stamp_ns <= next_t:
                buf.popleft()

    def _check(self, slot: int, t: int, picks: dict[str, Pick]) -> AlignedFrame | None:
        return check_frame(self.report, self.features, self.tolerance_ns, slot, t, picks)
