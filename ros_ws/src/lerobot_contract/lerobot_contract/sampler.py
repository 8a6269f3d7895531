"""Live sampling: the newest message per feature onto the dataset's frame grid, as messages arrive.

The rule is the bag converter's (`lerobot_contract.align`, DESIGN.md section 6), applied live:

* an episode starts at `start_ns`; samples stamped before it are ignored, and frame 0 is at the first time
  where every feature has a sample (the latest of the features' first stamps), or up to one frame period
  later where the cameras' measured stamp phase puts the grid (`align.grid_start`, the same function as the
  bag converter), so frame 0 holds real data and frames show each camera's newest image;
* frame k is at ``frame_time(t0, k, fps)``; it takes, per feature, the newest sample stamped at or before the
  frame time (a sample stamped exactly at the frame time belongs to that frame) and nothing from the future;
* a frame whose sample for some feature is older than that feature's `max_age_ns`, or whose samples are spread
  by more than `tolerance_ns`, is dropped and counted -- never filled in;
* a sample stamped like its feature's newest one is an exact duplicate (dropped) or a conflicting sample (the
  later one wins), counted (`align.absorb_equal_stamp`, as in the bag converter).

Live, a frame cannot wait for the future forever: frame t is sampled as soon as every feature has a sample
stamped after t (nothing at or before t can still come, stamps being monotonic per topic), or once the clock
reaches ``t + latency_ns`` (a topic has paused; its frame is then judged by `max_age_ns`). A sample that
arrives after its frame was sampled is counted as late. Recording a bag of the same stream and converting it
with ``bag2dataset --split marker:...`` (markers at the episode starts) gives the same frames.

The clock is read through the receive-minus-stamp offset (`StampClock`), so stamps on another clock than the
recorder's (a device clock, sim time) still work. One bad stamp never moves it: a sample stamped before 0, one
stamped more than the latency window ahead of the clock's reading (future; `StampClock` says why that bound),
or one more than `clock_jump_ns` behind both the clock's reading and its topic's previous stamp (far past; either
at 0: zero) is refused and counted under that reason (`rejected`, `last_rejection`), while a late delivery (the
recorder stalled: stamps still follow on) is kept. A topic's first sample, taken before any clock was known, is
withdrawn (counted as future) when the topic's next sample shows it was ahead. Only `CLOCK_CONFIRM_SAMPLES`
consecutive samples that agree on a new clock move it: behind (a sim restarted), or ahead by more than
`clock_jump_ns`, it is a clock reset, which ends the episode (ClockJumpError) as before; ahead by less (the first
deliveries were late, so the estimate was too high) it lowers the estimate, the samples refused meanwhile are
taken, and the episode goes on: a clock reading later releases frames sooner but invalidates none released.

The work of one `poll` is bounded: a stretch of frame slots where no topic has data (the clock leapt ahead) is
counted as stale drops in one step, not walked one slot at a time.

Messages lost before they reached the sampler (a subscription queue that overflowed while the recorder was busy,
a best-effort transport) are reported with the next message (`push(..., lost=n)`, from the publisher's sequence
numbers) and counted per feature (`LiveStats.lost_by_feature`). Frame 0 waits for every feature's first sample
*received*; when a feature's messages were lost across the episode start, it had data earlier than that: the
slots from the first time every feature had data (the lost stamps taken as spread evenly between the received
ones on either side) to frame 0 are counted as dropped (`LiveStats.frames_dropped_lost`), not silently missing
from the episode. Lost messages inside the episode leave the frames holding the newest sample received (judged
by `max_age_ns` as ever) and are counted the same way.

Memory is bounded: per feature only the newest sample at or before the next frame time and the ones after it
are kept, and at most `max_samples` of them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lerobot_contract.align import (
    AlignedFrame,
    AlignFeature,
    GridPhase,
    Pick,
    Sample,
    SyncReport,
    absorb_equal_stamp,
    check_frame,
    frame_time,
    new_report,
    trim_buffers,
)
from lerobot_contract.errors import ClockJumpError
from lerobot_contract.time import NS

# Why a sample's stamp was refused.
STAMP_REJECTIONS = ("zero", "negative", "future", "far_past")
# Consecutive samples that must agree on a new clock before it replaces the old one (a clock reset).
CLOCK_CONFIRM_SAMPLES = 5
# The least a stamp may be ahead of the clock and still be taken, whatever the latency window (even 0): offsets
# read on sim time move in steps of the /clock period (10 ms at the usual 100 Hz), so smaller leads are noise.
MIN_AHEAD_NS = 10_000_000
# The offset estimate is taken from the samples of the last one to two windows of this length (receive time), so
# it follows a clock or a transport delay that moved either way within two windows.
STAMP_CLOCK_WINDOW_NS = 2 * NS


class StampClock:
    """The offset (receive time - stamp) between the recorder's clock and the stamps' clock, robust to outliers.

    The estimate is the second smallest offset accepted in the current and the previous window of `window_ns`
    receive time (the smallest transport delay seen lately, but never set by one sample alone): it falls at once
    when deliveries get faster and rises within two windows when every delivery is slower, e.g. after samples
    stamped ahead moved it too low. A sample is accepted when its stamp is at most `ahead_ns` ahead of the clock's
    reading (receive time - estimate) and at most `bound_ns` behind it; behind by more, it is still accepted when its
    stamp follows on from its topic's previous one (a late delivery: the recorder stalled). Any other sample is
    refused ("future" or "far_past") unless `confirm` consecutive refused samples agree with each other: then
    the clock really moved, and the check says which way ("reset": the stamps went back, "ahead": they moved
    ahead, e.g. the first samples came late and the estimate was too high).

    Ahead and behind are not symmetric: a late sample only waits in a buffer, while an accepted sample that is
    ahead lowers the estimate by as much, and every frame up to the clock's reading minus the sampler's latency
    window is then released. Up to the latency window that releases nothing whose time the stamps' clock has
    not reached (the window is exactly the wait for late samples the sampler already adds); further ahead it
    would release frames before their samples can arrive, and the sample itself, taken as its topic's newest,
    would make every later genuine sample of the topic look out of order.
    """

    def __init__(
        self,
        bound_ns: int,
        confirm: int = CLOCK_CONFIRM_SAMPLES,
        ahead_ns: int | None = None,
        window_ns: int = STAMP_CLOCK_WINDOW_NS,
    ) -> None:
        if bound_ns <= 0:
            raise ValueError(f"bound_ns must be positive, got {bound_ns}")
        if confirm < 1:
            raise ValueError(f"confirm must be >= 1, got {confirm}")
        if ahead_ns is not None and not 0 < ahead_ns <= bound_ns:
            raise ValueError(f"ahead_ns must be in (0, bound_ns={bound_ns}], got {ahead_ns}")
        if window_ns <= 0:
            raise ValueError(f"window_ns must be positive, got {window_ns}")
        self.window_ns = window_ns
        self.bound_ns = bound_ns
        self.ahead_ns = bound_ns if ahead_ns is None else ahead_ns
        self.confirm = confirm
        self.accepted = 0  # samples accepted on the current clock
        self._low: list[int] = []  # the two smallest offsets accepted in the current window
        self._previous: list[int] = []  # ... and in the window before it
        self._window_start: int | None = None
        self._challenger: list[int] = []

    @property
    def offset_ns(self) -> int | None:
        """receive - stamp of the current clock (None before the first sample)."""
        both = sorted([*self._previous, *self._low])[:2]
        return both[-1] if both else None

    @property
    def settled(self) -> bool:
        """True once `confirm` samples agreed on the clock."""
        return self.accepted >= self.confirm

    def check(self, stamp_ns: int, receive_ns: int, continuous: bool = False) -> str | None:
        """None: the sample fits the clock; "future"/"far_past": refused; "reset"/"ahead": it confirmed a new
        clock, behind (a higher offset) or ahead of (a lower offset) the previous one.

        `continuous`: the stamp follows its topic's previous one closely. Such a sample is not refused for being
        far behind the clock (it was delivered late: the recorder stalled); ahead of the clock it is judged like
        any other, since one stamp a second ahead still follows on from its predecessor within `bound_ns`.
        """
        offset = receive_ns - stamp_ns
        estimate = self.offset_ns
        ahead = 0 if estimate is None else estimate - offset  # how far the stamp is beyond the clock's reading
        if -self.bound_ns <= ahead <= self.ahead_ns:
            self._accept(offset, receive_ns)
            self._challenger.clear()
            return None
        assert estimate is not None
        if ahead < 0 and continuous:
            self._challenger.clear()
            return None
        if self._challenger and abs(offset - self._challenger[0]) <= self.bound_ns:
            self._challenger.append(offset)
        else:
            self._challenger = [offset]
        if len(self._challenger) >= self.confirm:
            new, self._challenger = self._challenger, []
            self._low, self._previous, self._window_start, self.accepted = [], [], None, 0
            for value in new:
                self._accept(value, receive_ns)
            assert self.offset_ns is not None
            return "reset" if self.offset_ns > estimate else "ahead"
        return "future" if ahead > 0 else "far_past"

    @property
    def challenger_len(self) -> int:
        """Refused samples in a row that agree with each other on another clock."""
        return len(self._challenger)

    def _accept(self, offset: int, receive_ns: int) -> None:
        self.accepted += 1
        if self._window_start is None:
            self._window_start = receive_ns
        elif receive_ns - self._window_start >= self.window_ns:
            self._previous, self._low, self._window_start = self._low, [], receive_ns
        self._low = sorted([*self._low, offset])[:2]


@dataclass
class LiveStats:
    """What only live sampling can see (per episode)."""

    late_samples: int = 0
    out_of_order: int = 0
    overflow: int = 0
    ignored_before_start: int = 0
    late_by_feature: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)  # refused stamps by reason (STAMP_REJECTIONS)
    # Messages lost before they reached the sampler (sequence gaps), per feature, and the frames from the episode
    # start that they cost (slots before frame 0 where every feature had data, but not all of it arrived).
    lost_by_feature: dict[str, int] = field(default_factory=dict)
    frames_dropped_lost: int = 0


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
        if clock_jump_ns <= 0:
            raise ValueError(f"clock_jump_ns must be positive, got {clock_jump_ns}")
        self._features = list(features)
        self.features = {f.key: f for f in features}
        self.fps = fps
        self.tolerance_ns = tolerance_ns
        self.latency_ns = latency_ns
        self.clock_jump_ns = clock_jump_ns
        self.max_samples = max_samples
        # A stamp may be at most the latency window ahead of the clock (see StampClock for why that bound).
        self.ahead_ns = min(max(latency_ns, MIN_AHEAD_NS), clock_jump_ns)
        self.clock = StampClock(clock_jump_ns, ahead_ns=self.ahead_ns)
        self.rejected: dict[str, int] = {}  # refused stamps by reason, since the sampler was made
        self.last_rejection = ""
        self._buffers: dict[str, deque[Sample]] = {k: deque() for k in self.features}
        self._last_stamp: dict[str, int] = {}
        self._last_now: int | None = None
        self._seq = 0
        self._start_ns: int | None = None
        self._episode_start_ns: int | None = None  # `_start_ns` of the latest episode, kept after `stop`
        self._start_clock_ns = 0
        # Samples refused in a row that agree on another clock (replayed when the first clock proves wrong).
        # Samples refused while the clock may be wrong: (key, stamp, payload, reason, the LiveStats that counted
        # the refusal: an episode start replaces it, and its successor never counted it).
        self._pending: list[tuple[str, int, Any, str, LiveStats]] = []
        self._t0: int | None = None
        self._next_slot = 0
        self._clock_changed = False
        self._phase = GridPhase(self._features, fps)
        # Per feature, messages reported lost and not yet placed (a sample that carries the report is refused).
        self._unplaced_lost: dict[str, int] = {}
        # Per feature, the estimated first stamp in the episode of a message lost before its first received one.
        self._lost_first: dict[str, int] = {}
        self.report = self._new_report()
        self.live = LiveStats()

    def _new_report(self) -> SyncReport:
        return new_report("hold", self.fps, self._features)

    @property
    def _offset(self) -> int:
        return self.clock.offset_ns or 0

    @property
    def active(self) -> bool:
        """True between `start` and `stop`."""
        return self._start_ns is not None

    @property
    def t0_ns(self) -> int | None:
        """Time of frame 0 (None until every feature has a sample in this episode and the grid is placed)."""
        return self._t0

    @property
    def frame0_delay_ns(self) -> int | None:
        """How long after the episode start (stamps' clock) frame 0 is (None until it is placed; after `stop`, the
        episode's)."""
        if self._t0 is None or self._episode_start_ns is None:
            return None
        return self._t0 - self._episode_start_ns

    def first_after(self, delay_ns: int) -> list[str]:
        """Features whose first sample in the episode is stamped more than `delay_ns` after its start."""
        if self._episode_start_ns is None:
            return []
        limit = self._episode_start_ns + delay_ns
        return [k for k, f in self.report.features.items() if f.first_stamp_ns is not None and f.first_stamp_ns > limit]

    @property
    def waiting_for(self) -> list[str]:
        """Features without a sample yet in this episode (frame 0 waits for them)."""
        return [k for k, f in self.report.features.items() if f.first_stamp_ns is None]

    @property
    def silent(self) -> list[str]:
        """Features that never had a sample since the sampler was made (episode or not)."""
        return [k for k in self.features if k not in self._last_stamp]

    @property
    def clock_settled(self) -> bool:
        """False while the first samples with receive times have not yet agreed on the stamps' clock."""
        return self.clock.offset_ns is None or self.clock.settled

    def start(self, start_ns: int) -> int:
        """Begin an episode at clock time `start_ns`; returns the start on the stamps' clock.

        Samples stamped before the returned time are not used (it equals `start_ns` when the stamps are on the
        recorder's clock, up to the smallest transport delay seen).
        """
        self._start_clock_ns = start_ns
        self._start_ns = self._episode_start_ns = start_ns - self._offset
        self._last_now = None
        self._t0 = None
        self._next_slot = 0
        self._clock_changed = False
        self._phase = GridPhase(self._features, self.fps)
        for buf in self._buffers.values():
            buf.clear()
        self._unplaced_lost.clear()
        self._lost_first.clear()
        self.report = self._new_report()
        self.live = LiveStats()
        return self._start_ns

    def push(self, key: str, stamp_ns: int, payload: Any, receive_ns: int | None = None, lost: int = 0) -> str | None:
        """Add a sample of feature `key` (received at clock time `receive_ns`, when known); `lost`: messages of its
        topic published between the previous one received and this one that never arrived (sequence gap).

        Returns None when the sample was taken, else why not (one of STAMP_REJECTIONS, "out_of_order",
        "before_start"). Raises ClockJumpError when the stamps moved to a new clock during an episode (or,
        without receive times, when the feature's stamps went back by more than `clock_jump_ns`).
        """
        if lost < 0:
            raise ValueError(f"lost must be >= 0, got {lost}")
        if lost:
            self._unplaced_lost[key] = self._unplaced_lost.get(key, 0) + lost
            if self._start_ns is not None:
                self.live.lost_by_feature[key] = self.live.lost_by_feature.get(key, 0) + lost
        reason = self._judge(key, stamp_ns, payload, receive_ns)
        if reason is not None:
            return reason
        return self._store(key, stamp_ns, payload)

    def _store(self, key: str, stamp_ns: int, payload: Any) -> str | None:
        """Keep a sample that passed the checks."""
        previous = self._last_stamp.get(key)
        self._last_stamp[key] = stamp_ns
        lost = self._unplaced_lost.pop(key, 0)
        if self._start_ns is None:
            return None
        if stamp_ns < self._start_ns:
            self.live.ignored_before_start += 1
            return "before_start"
        stats = self.report.features[key]
        if absorb_equal_stamp(self._buffers[key], stats, stamp_ns, payload):
            return None  # a duplicate (dropped) or a conflicting sample (the later one wins), counted in the report
        if lost and stats.first_stamp_ns is None:
            self._place_lost_before_first(key, previous, stamp_ns, lost)
        if self._t0 is not None and stamp_ns <= frame_time(self._t0, self._next_slot - 1, self.fps):
            self.live.late_samples += 1
            self.live.late_by_feature[key] = self.live.late_by_feature.get(key, 0) + 1
        if stats.first_stamp_ns is None:
            stats.first_stamp_ns = stamp_ns
        stats.last_stamp_ns = stamp_ns
        stats.samples += 1
        self._seq += 1
        buf = self._buffers[key]
        buf.append(Sample(stamp_ns, self._seq, payload, stats.samples - 1))
        if len(buf) > self.max_samples:
            buf.popleft()
            self.live.overflow += 1
        self._phase.add(key, stamp_ns)
        return None

    def _place_lost_before_first(self, key: str, previous: int | None, stamp_ns: int, lost: int) -> None:
        """`lost` messages of `key` came between its previous sample (`previous`) and its first one in the
        episode (`stamp_ns`): the stamp of the first of them at or after the episode start, when one is (the lost
        stamps are taken as spread evenly between the two received ones; without a previous one: the start)."""
        assert self._start_ns is not None
        if previous is None or previous >= stamp_ns:
            self._lost_first[key] = self._start_ns
            return
        step = (stamp_ns - previous) / (lost + 1)
        index = max(1, math.ceil((self._start_ns - previous) / step))
        if index <= lost:
            self._lost_first[key] = max(self._start_ns, previous + round(index * step))

    def _count_lost_start(self) -> None:
        """Frame 0 was just placed: count the slots before it where every feature had data, had its lost
        messages arrived (see `_place_lost_before_first`), as dropped."""
        assert self._t0 is not None
        if not self._lost_first:
            return
        had_data = max(
            min(f.first_stamp_ns or 0, self._lost_first.get(k, f.first_stamp_ns or 0))
            for k, f in self.report.features.items()
        )
        missed = 0
        while frame_time(self._t0, -(missed + 1), self.fps) >= had_data:
            missed += 1
        self.live.frames_dropped_lost = missed

    def _judge(self, key: str, stamp_ns: int, payload: Any, receive_ns: int | None) -> str | None:
        """Why the sample cannot be used (None: it can); raises ClockJumpError on a clock reset in an episode."""
        if stamp_ns < 0:
            return self._reject(key, "negative", f"stamp {stamp_ns / NS:.3f} s is negative")
        last = self._last_stamp.get(key)
        continuous = last is not None and abs(stamp_ns - last) <= self.clock_jump_ns
        if receive_ns is not None:
            before = self.clock.offset_ns
            settled, wrong = self.clock.settled, self.clock.accepted
            verdict = self.clock.check(stamp_ns, receive_ns, continuous)
            if verdict in ("future", "far_past"):
                assert before is not None
                off = (receive_ns - stamp_ns - before) / NS
                where = f"{-off:.3f} s ahead of" if verdict == "future" else f"{off:.3f} s behind"
                limit = "latency_s" if verdict == "future" else "clock_jump_s"
                reason = "zero" if stamp_ns == 0 else verdict  # a header nobody stamped
                if self.clock.challenger_len == 1:
                    self._pending.clear()
                self._pending.append((key, stamp_ns, payload, reason, self.live))
                return self._reject(
                    key, reason, f"stamp {stamp_ns / NS:.3f} s is {where} the clock (more than {limit})"
                )
            if verdict is not None:
                assert before is not None
                moved = (self.clock.offset_ns or 0) - before
                way = "back" if moved > 0 else "ahead"
                confirm = self.clock.confirm
                text = f"{key}: stamps {abs(moved) / NS:.3f} s {way} of the previous clock, {confirm} samples in a row"
                if verdict == "ahead" and -moved <= self.clock_jump_ns:
                    # The estimate was too high (the first samples came late): the clock reads later now, which
                    # releases frames sooner but invalidates none already released; the refused samples were right.
                    self._take_pending(f"{text}: the clock estimate was lowered", receive_ns)
                elif settled:  # a jump beyond clock_jump_s either way: the stamps' clock was reset
                    self._last_stamp.clear()
                    self._pending.clear()
                    return self._clock_reset(f"{text}: the clock was reset")
                else:
                    self._rebase(text, wrong, "future" if moved > 0 else "far_past")
                    return None
            self._pending.clear()
            last = self._withdraw_ahead(key, receive_ns, stamp_ns)
        elif not continuous and self._last_now is not None and stamp_ns - self._last_now > self.clock_jump_ns:
            ahead = (stamp_ns - self._last_now) / NS
            return self._reject(key, "future", f"stamp {stamp_ns / NS:.3f} s is {ahead:.3f} s ahead of the clock")
        return self._out_of_order(key, stamp_ns, receive_ns, last)

    def _out_of_order(self, key: str, stamp_ns: int, receive_ns: int | None, last: int | None) -> str | None:
        """Why a sample that fits the clock cannot follow its topic's previous stamp `last` (None: it can)."""
        if last is not None and stamp_ns < last:
            if last - stamp_ns <= self.clock_jump_ns:
                self.live.out_of_order += 1
                return "out_of_order"
            if stamp_ns == 0 and receive_ns is None:
                return self._reject(key, "zero", "stamp 0 (unset header) after a stamped message")
            # The stamps went back and, with receive times, the recorder's clock with them (sim time reset).
            self._last_stamp[key] = stamp_ns
            return self._clock_reset(
                f"{key}: stamp {stamp_ns / NS:.3f} s is {(last - stamp_ns) / NS:.3f} s before the previous one "
                f"({last / NS:.3f} s): the clock was reset"
            )
        return None

    def _take_pending(self, text: str, receive_ns: int) -> None:
        """The clock moved ahead: take the samples refused meanwhile (they were right)."""
        pending, self._pending = self._pending, []
        for key, stamp_ns, payload, refused_as, counted_in in pending:
            self._uncount(refused_as, counted_in)
            last = self._withdraw_ahead(key, receive_ns, stamp_ns)
            if last is not None and stamp_ns < last:
                self.live.out_of_order += 1
            else:
                self._store(key, stamp_ns, payload)
        self.last_rejection = f"{text}; the {len(pending)} sample(s) refused meanwhile were taken"

    def _uncount(self, reason: str, counted_in: LiveStats) -> None:
        """Take back a refusal counted in `rejected` and in `counted_in` (the episode's counters, if still these)."""
        for counts in (self.rejected, counted_in.rejected) if counted_in is self.live else (self.rejected,):
            counts[reason] -= 1
            if not counts[reason]:
                del counts[reason]

    def _withdraw_ahead(self, key: str, receive_ns: int, stamp_ns: int) -> int | None:
        """The topic's newest stamp, after withdrawing it if it is ahead of the clock's reading by more than
        `ahead_ns` while the sample `stamp_ns` (on the clock) comes before it.

        Such a stamp was taken before the clock was known (the first sample sets the estimate, and a second one
        may show it was ahead) and is wrong: the topic's later samples would all look out of order. It is
        withdrawn (with any other of the topic's samples that far ahead) and counted as "future"."""
        limit = receive_ns - self._offset + self.ahead_ns
        last = self._last_stamp.get(key)
        if last is None or last <= limit or stamp_ns >= last:
            return last
        buf = self._buffers[key]
        withdrawn = 0
        while buf and buf[-1].stamp_ns > limit:
            buf.pop()
            withdrawn += 1
        if withdrawn:
            stats = self.report.features[key]
            stats.samples -= withdrawn
            stats.last_stamp_ns = buf[-1].stamp_ns if buf else None
            if not buf:
                stats.first_stamp_ns = None
            if self._next_slot == 0:  # place the grid again without the withdrawn stamps (one may have set it)
                self._t0 = self.report.t0_ns = None
                self._phase = GridPhase(self._features, self.fps)
                held = sorted((sample.stamp_ns, k) for k, b in self._buffers.items() for sample in b)
                for stamp, k in held:
                    self._phase.add(k, stamp)
            self.live.rejected["future"] = self.live.rejected.get("future", 0) + withdrawn
        self.rejected["future"] = self.rejected.get("future", 0) + max(1, withdrawn)
        ahead = (last - limit + self.ahead_ns) / NS
        self.last_rejection = (
            f"{key}: stamp {last / NS:.3f} s was {ahead:.3f} s ahead of the clock (taken before the clock was known): "
            "sample withdrawn (future)"
        )
        if buf:
            self._last_stamp[key] = buf[-1].stamp_ns
        else:
            self._last_stamp.pop(key, None)
        return self._last_stamp.get(key)

    def _rebase(self, text: str, wrong: int, reason: str) -> None:
        """The first `wrong` samples set a wrong clock (an absurd stamp came first): take the clock the next ones
        agree on, and the samples refused meanwhile (they were right), as if the wrong ones had been refused."""
        pending, self._pending = self._pending, []
        self._last_stamp.clear()
        if self._start_ns is not None:
            if self._next_slot > 0:
                self._clock_changed = True
                raise ClockJumpError(f"{text} after frames were taken: the clock was reset")
            self._start_ns = self._episode_start_ns = self._start_clock_ns - self._offset
            self._t0 = None
            self._phase = GridPhase(self._features, self.fps)
            for buf in self._buffers.values():
                buf.clear()
            self.report = self._new_report()
        for key, stamp_ns, payload, refused_as, counted_in in pending:
            self._uncount(refused_as, counted_in)
            self._store(key, stamp_ns, payload)
        for counts in (self.rejected, self.live.rejected):
            counts[reason] = counts.get(reason, 0) + wrong
        self.last_rejection = f"{text}: the first {wrong} sample(s) were wrong, ignored ({reason})"

    def _clock_reset(self, message: str) -> str | None:
        """Between episodes a reset clock is expected (sim resets); during one it ends the episode."""
        if self._start_ns is None:
            return None
        self._clock_changed = True
        raise ClockJumpError(message)

    def _reject(self, key: str, reason: str, text: str) -> str:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self.live.rejected[reason] = self.live.rejected.get(reason, 0) + 1
        self.last_rejection = f"{key}: {text}: sample ignored ({reason})"
        return reason

    def poll(self, now_ns: int, end_ns: int | None = None) -> list[AlignedFrame]:
        """Frames that can be sampled at clock time `now_ns` (kept ones only; drops are counted in `report`).

        `end_ns`: the clock time the episode is to end at; no frame after it is released (as `stop(end_ns)`
        would not take it), however late the poll that ends the episode comes.
        """
        if self._last_now is not None and now_ns < self._last_now - self.clock_jump_ns:
            back = (self._last_now - now_ns) / NS
            self._last_now = now_ns
            raise ClockJumpError(f"the clock went back {back:.3f} s (from a sim reset or a time source change)")
        self._last_now = now_ns if self._last_now is None else max(self._last_now, now_ns)
        stop_at = None if end_ns is None else self._episode_end(end_ns)
        return self._release(now_ns - self._offset - self.latency_ns, stop_at=stop_at)

    def _episode_end(self, end_ns: int) -> int | None:
        """The end on the stamps' clock of an episode ending at clock time `end_ns` (None: not in an episode).

        The episode lasts `end_ns - start` of the recorder's clock from its start on the stamps' clock, whatever
        the offset estimate learnt meanwhile (it drops as faster deliveries are seen, on sim time by up to a
        /clock period): an estimate that moved must not lengthen or shorten the episode.
        """
        if self._start_ns is None:
            return None
        return self._start_ns + end_ns - self._start_clock_ns

    def can_end(self, now_ns: int, end_ns: int) -> bool:
        """True once every frame of an episode ending at clock time `end_ns` can be judged at clock time `now_ns`:
        every feature has a sample stamped after the end (nothing at or before it can still come), or the clock is
        past the end by the latency window (a topic has paused; `poll` judges those frames by `max_age_ns`).

        Ending the episode (`stop`) before that loses the last frames whose samples are still in flight, without
        counting them: a busy machine delivered them 100 ms or more after their stamps (seen under load: 26 frames of
        a 1 s episode's 30 slots, 0 dropped).
        """
        end = self._episode_end(end_ns)
        if end is None:
            return True
        if all(buf and buf[-1].stamp_ns > end for buf in self._buffers.values()):
            return True
        return now_ns - self._offset - self.latency_ns >= end

    def stop(self, end_ns: int) -> list[AlignedFrame]:
        """End the episode at clock time `end_ns`: the remaining frames, up to the earliest last sample."""
        frames: list[AlignedFrame] = []
        if not self.waiting_for:
            limit = min(f.last_stamp_ns or 0 for f in self.report.features.values())
            end = self._episode_end(end_ns)
            if not self._clock_changed and end is not None:  # after a reset the buffers hold old stamps
                limit = min(limit, end)
            frames = self._release(limit, stop_at=limit, force=True)
        self._start_ns = None
        for buf in self._buffers.values():
            buf.clear()
        return frames

    def _start_grid(self, due_until: int, force: bool) -> bool:
        """Place frame 0 once the cameras' phase is measured (or the window is due, or the episode ends)."""
        if self._t0 is not None:
            return True
        first = self._phase.first_ns
        if first is None:
            return False
        self._trim(first)  # frame 0 is at or after `first`: older samples but the newest are not needed
        end = self._phase.window_end_ns
        assert end is not None
        if not (force or self._phase.ready() or due_until >= end):
            return False
        self._t0 = self._phase.choose()
        self.report.t0_ns = self._t0
        self._count_lost_start()
        return True

    def _release(self, due_until: int, stop_at: int | None = None, force: bool = False) -> list[AlignedFrame]:
        """Frames complete or due (frame time <= `due_until`), up to `stop_at`."""
        out: list[AlignedFrame] = []
        if not self._start_grid(due_until, force):
            return out
        assert self._t0 is not None
        while True:
            t = frame_time(self._t0, self._next_slot, self.fps)
            if stop_at is not None and t > stop_at:
                break
            complete = all(buf and buf[-1].stamp_ns > t for buf in self._buffers.values())
            if not (complete or t <= due_until):
                break
            if not complete and self._skip_silent(t, due_until):
                continue
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

    def _age_limit(self, key: str) -> int:
        """How old a held sample may be; a feature without max_age is held at most `clock_jump_ns` here."""
        limit = self.features[key].max_age_ns
        return self.clock_jump_ns if limit is None else limit

    def _skip_silent(self, t: int, due_until: int) -> bool:
        """Count the due slots from `t` on as stale drops in one step when no topic has data after `t` and a
        held sample is already too old: every one of them would hold the same samples and be dropped."""
        newest = {k: buf[-1].stamp_ns if buf else None for k, buf in self._buffers.items()}
        if any(v is None or v > t for v in newest.values()):
            return False
        if not any(t - v > self._age_limit(k) for k, v in newest.items() if v is not None):
            return False
        assert self._t0 is not None
        last = self._first_slot_after(due_until) - 1
        first = self._next_slot
        for key, stamp in newest.items():
            assert stamp is not None
            stale_from = max(first, self._first_slot_after(stamp + self._age_limit(key)))
            self.report.features[key].stale_drops += max(0, last - stale_from + 1)
        self.report.frames_dropped_stale += last - first + 1
        self.report.slots = last + 1
        self._next_slot = last + 1
        return True

    def _first_slot_after(self, time_ns: int) -> int:
        """The first slot whose frame time is after `time_ns`."""
        assert self._t0 is not None
        k = max(0, (time_ns - self._t0) * self.fps // NS)
        while frame_time(self._t0, k, self.fps) <= time_ns:
            k += 1
        while k > 0 and frame_time(self._t0, k - 1, self.fps) > time_ns:
            k -= 1
        return k

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
        trim_buffers(self._buffers.values(), next_t)

    def _check(self, slot: int, t: int, picks: dict[str, Pick]) -> AlignedFrame | None:
        return check_frame(self.report, self.features, self.tolerance_ns, slot, t, picks)
