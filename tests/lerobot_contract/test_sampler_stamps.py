"""LiveSampler against absurd stamps (issue 18.1): one bad stamp never moves the clock, ends an episode or hangs.

The streams are on another clock than the recorder's (stamps 5 s behind the receive times, 1 ms transport
delay), as with a device clock or sim time, so the sampler reads its clock through the receive-minus-stamp
offset: the estimate that one far-future stamp used to drag 68 years ahead.
"""

from __future__ import annotations

import pytest

from lerobot_contract.align import AlignFeature
from lerobot_contract.errors import ClockJumpError
from lerobot_contract.sampler import LiveSampler
from lerobot_contract.time import NS

MS = 1_000_000
BEHIND = 5_000 * MS  # the stamps' clock runs 5 s behind the recorder's
FAR_FUTURE = 2_147_483_647 * NS  # header.stamp.sec = INT32_MAX


def make() -> LiveSampler:
    feats = [AlignFeature("joints", max_age_ns=100 * MS), AlignFeature("cam", max_age_ns=100 * MS)]
    return LiveSampler(feats, fps=30, tolerance_ns=100 * MS, latency_ns=50 * MS, clock_jump_ns=NS)


def feed(
    s: LiveSampler, start_ms: int, end_ms: int, bad: dict[int, tuple[str, int]] | None = None, behind: int = BEHIND
) -> list[int]:
    """Joints every 10 ms, a camera at 30 fps, in [start_ms, end_ms); `bad`: at ms -> (key, stamp) instead.

    Returns the slots of the frames released on the way (polled at every message's receive time); the stamps'
    clock runs `behind` the recorder's.
    """
    bad = bad or {}
    events = [(ms * MS, "joints") for ms in range(start_ms, end_ms, 10)]
    events += [(round(k * NS / 30), "cam") for k in range(end_ms * 30 // 1000 + 1)]
    events = sorted((t, key) for t, key in events if start_ms * MS <= t < end_ms * MS)
    slots = []
    for t, key in events:
        receive = t + behind + 1 * MS
        stamp = t
        ms = t // MS
        if ms in bad and bad[ms][0] == key:
            stamp = bad[ms][1]
        s.push(key, stamp, t, receive_ns=receive)
        slots.extend(f.slot for f in s.poll(receive))
    return slots


@pytest.mark.parametrize(
    ("key", "stamp", "reason"),
    [
        ("joints", FAR_FUTURE, "future"),
        ("cam", FAR_FUTURE, "future"),
        ("joints", 0, "zero"),
        ("cam", 0, "zero"),
        ("joints", -5 * NS, "negative"),
        ("cam", 300 * MS, "far_past"),
    ],
)
def test_one_absurd_stamp_is_refused_and_counted_and_the_episode_goes_on(key: str, stamp: int, reason: str) -> None:
    s = make()
    feed(s, 0, 100)  # the clock is known before the episode
    s.start(100 * MS + BEHIND)
    before = feed(s, 100, 1000)
    assert s.report.frames_dropped == 0 and len(before) >= 25
    after = feed(s, 1000, 3000, bad={1500: (key, stamp)})
    assert s.rejected == {reason: 1}  # counted under its reason, sampler-wide
    assert s.live.rejected == {reason: 1}  # and in the episode's counters
    assert reason in s.last_rejection and key in s.last_rejection
    # Every frame of the 3 s episode is there: no slot dropped, none released early, the clock did not move.
    frames = before + after + [f.slot for f in s.stop(3000 * MS + BEHIND)]
    assert frames == list(range(len(frames)))
    assert len(frames) == 87  # 100 ms (the first camera image) .. 2966.7 ms (the last), at 30 fps
    assert s.report.frames_dropped == 0
    assert s.report.slots == len(frames)


def test_far_future_stamp_does_not_release_future_frames_or_hang() -> None:
    s = make()
    feed(s, 0, 100)
    s.start(100 * MS + BEHIND)
    feed(s, 100, 500)
    slots_before = s.report.slots
    s.push("joints", FAR_FUTURE, "bogus", receive_ns=500 * MS + BEHIND)
    # The clock still reads ~500 ms on the stamps' clock: only frames due by then are released.
    s.poll(510 * MS + BEHIND)
    assert s.report.slots - slots_before <= 1
    assert s.report.frames_dropped == 0


def test_a_stalled_recorder_receiving_a_backlog_late_is_not_a_clock_reset() -> None:
    """Under load the recorder may run 2 s late: the backlog's stamps follow on, only the receive times jump."""
    s = make()
    feed(s, 0, 100)
    s.start(100 * MS + BEHIND)
    feed(s, 100, 1000)
    stall_end = 3000 * MS + BEHIND
    events = [(ms * MS, "joints") for ms in range(1000, 3000, 10)] + [
        (round(k * NS / 30), "cam") for k in range(30, 90)
    ]
    for t, key in sorted(events):
        s.push(key, t, t, receive_ns=stall_end)  # the whole backlog arrives at once, 0-2 s late
        s.poll(stall_end)
    after = feed(s, 3000, 5000)
    assert s.rejected == {} and s.live.rejected == {}
    assert s.live.late_samples > 0  # the backlog came after its frames were due: counted as late, not refused
    assert len(after) >= 55  # and the episode goes on with fresh frames
    assert s.clock.offset_ns == BEHIND + 1 * MS  # the clock still reads the stamps' clock


@pytest.mark.parametrize("stamp", [FAR_FUTURE, 3 * NS + 10 * MS])
def test_an_absurd_first_stamp_does_not_become_the_clock(stamp: int) -> None:
    """The policy node starts sampling at its first message: that one must not set the clock for good."""
    s = make()
    s.start(BEHIND)
    s.push("joints", stamp, "bogus", receive_ns=BEHIND)
    frames = feed(s, 0, 2000) + [f.slot for f in s.stop(2000 * MS + BEHIND)]
    assert sum(s.rejected.values()) == 1 and sum(s.live.rejected.values()) == 1
    assert frames == list(range(len(frames))) and len(frames) >= 58  # 0 .. 1966.7 ms at 30 fps
    assert s.report.frames_dropped == 0
    assert s.clock.offset_ns == BEHIND + 1 * MS


def test_a_genuine_clock_reset_still_ends_the_episode() -> None:
    s = make()
    feed(s, 0, 100)
    s.start(100 * MS + BEHIND)
    feed(s, 100, 3000)
    reset_at = 3000 * MS + BEHIND  # the stamps go back 3 s
    with pytest.raises(ClockJumpError, match="clock was reset"):
        # The sim restarted: from now on every topic stamps from 0 again, consistently.
        for i in range(20):
            receive = reset_at + i * 10 * MS + 1 * MS
            s.push("joints", i * 10 * MS, i, receive_ns=receive)
            if i % 3 == 0:
                s.push("cam", i * 10 * MS, i, receive_ns=receive)
    assert s.rejected.get("far_past", 0) >= 1  # the first samples of the new clock wait for confirmation


def test_between_episodes_a_reset_clock_is_adopted_quietly() -> None:
    s = make()
    feed(s, 0, 3000)
    for i in range(20):  # sim restarted while no episode runs: its stamps start again from 0
        s.push("joints", i * 10 * MS, i, receive_ns=10 * NS + i * 10 * MS)
    assert s.start(10 * NS + 200 * MS) == pytest.approx(200 * MS, abs=2 * MS)


def test_release_work_is_bounded_when_the_recorder_clock_jumps_ahead() -> None:
    s = make()
    feed(s, 0, 100)
    s.start(100 * MS + BEHIND)
    feed(s, 100, 500)
    slots = s.report.slots
    # The node's clock leaps a year ahead (suspend, a bad time source): the year of slots with no data is
    # counted in one step, as stale drops, instead of walked one 1/30 s slot at a time.
    year = 365 * 24 * 3600 * NS
    frames = s.poll(500 * MS + BEHIND + year)
    assert len(frames) <= 4  # at most the frames the held samples are fresh enough for (max_age 100 ms)
    assert s.report.slots - slots == pytest.approx(year * 30 // NS, abs=10)
    assert s.report.frames_dropped_stale >= year * 30 // NS - 10


def test_stamps_without_receive_times_zero_and_negative_are_refused() -> None:
    s = make()
    s.start(0)
    for ms in range(0, 1500, 10):
        s.push("joints", ms * MS + 1, ms)
        s.push("cam", ms * MS + 1, ms)
    s.push("joints", 0, "zero")  # an unset header after 1.5 s of stamped ones: not a clock reset
    s.push("cam", -1, "negative")
    assert s.rejected == {"zero": 1, "negative": 1}
    assert s.live.out_of_order == 0


def test_the_episode_lasts_its_clock_time_while_the_offset_estimate_settles() -> None:
    """The first deliveries come 60 ms late (first samples over a new connection; on sim time, a /clock a period
    ahead), later ones 1 ms: the offset estimate drops by 59 ms during the episode. The episode still covers
    1.5 s of stamps from its start, not 1.559 s (it used to end at the clock's end minus the new estimate), also
    when the poll that ends it comes late."""
    s = make()
    for k, t in enumerate(range(0, 50 * MS, 10 * MS)):  # joints and camera, 60 ms late
        s.push("joints", t, t, receive_ns=t + BEHIND + 60 * MS)
        if k % 3 == 0:
            s.push("cam", t, t, receive_ns=t + BEHIND + 60 * MS)
    assert s.clock.offset_ns == BEHIND + 60 * MS
    start = 50 * MS + BEHIND + 60 * MS
    first_stamp = s.start(start)
    assert first_stamp == 50 * MS
    events = sorted([(ms * MS, "joints") for ms in range(50, 2000, 10)] + [(k * NS // 30, "cam") for k in range(2, 60)])
    frames = []
    for t, key in events:
        receive = t + BEHIND + 1 * MS
        s.push(key, t, t, receive_ns=receive)
        frames += s.poll(receive, end_ns=start + 1500 * MS)  # the episode's planned end
    assert s.clock.offset_ns == BEHIND + 1 * MS
    frames += s.stop(start + 1500 * MS)
    assert frames[-1].time_ns <= first_stamp + 1500 * MS < frames[-1].time_ns + NS // 30
    assert len(frames) == 45


@pytest.mark.parametrize(("key", "ahead_ms"), [("joints", 1000), ("joints", 999), ("cam", 1000), ("joints", 200)])
def test_a_stamp_ahead_of_the_clock_within_clock_jump_is_refused_as_future(key: str, ahead_ms: int) -> None:
    """recorder_messages seed 2 (44 of 10,000 inputs): one message stamped sec+1, up to 1 s ahead of the clock, was
    taken (within clock_jump_s); its topic's newest stamp leapt ahead, so every later genuine sample of that topic
    was refused as out of order and the frames went stale (7 of 14 kept), or ended the episode as a clock reset."""
    s = make()
    feed(s, 0, 100)
    s.start(100 * MS + BEHIND)
    before = feed(s, 100, 1000)
    after = feed(s, 1000, 3000, bad={1500: (key, 1500 * MS + ahead_ms * MS)})
    frames = before + after + [f.slot for f in s.stop(3000 * MS + BEHIND)]
    assert s.live.out_of_order == 0
    assert frames == list(range(87))  # every frame of the episode, as without the bad stamp
    assert s.report.frames_dropped == 0
    assert s.rejected == {"future": 1} and s.live.rejected == {"future": 1}
    assert "future" in s.last_rejection and "latency_s" in s.last_rejection
    assert s.clock.offset_ns == BEHIND + 1 * MS


def test_stamps_ahead_of_the_clock_do_not_move_its_estimate() -> None:
    """Two samples 0.9 s ahead (the estimate is the second smallest offset) used to lower it by 0.9 s, and frames
    were released before their samples could arrive."""
    s = make()
    feed(s, 0, 100)
    s.start(100 * MS + BEHIND)
    frames = feed(s, 100, 1000)
    frames += feed(s, 1000, 3000, bad={1500: ("joints", 2400 * MS), 1800: ("joints", 2700 * MS)})
    assert s.clock.offset_ns == BEHIND + 1 * MS
    assert s.rejected == {"future": 2}
    frames += [f.slot for f in s.stop(3000 * MS + BEHIND)]
    assert frames == list(range(87)) and s.report.frames_dropped == 0
    assert s.live.late_samples == 0  # no frame was released before its samples came


def test_a_first_sample_stamped_ahead_is_withdrawn_once_the_clock_is_known() -> None:
    """recorder_messages seed 2 input 5762: the very first message was stamped 1 s ahead. With no clock yet it set
    the estimate and the grid's start; the next samples (1 s behind it, within clock_jump_s) showed the clock, but
    its topic's newest stamp stayed 1 s ahead and all its later samples were refused as out of order: 0 frames."""
    s = make()
    s.start(0)  # stamps on the recorder's clock, no clock known yet (as in the recorder before its first message)
    frames = feed(s, 0, 2000, bad={0: ("cam", 1000 * MS)}, behind=0)  # the first message (cam sorts first)
    frames += [f.slot for f in s.stop(2000 * MS)]
    assert s.rejected == {"future": 1} and s.live.rejected == {"future": 1}
    assert "withdrawn" in s.last_rejection
    assert s.live.out_of_order == 0
    assert s.report.t0_ns is not None and s.report.t0_ns < 50 * MS  # the grid starts at the data, not 1 s later
    assert frames == list(range(len(frames))) and len(frames) >= 58
    assert s.report.frames_dropped == 0


def test_the_clock_moving_ahead_lowers_the_estimate_and_takes_the_samples_refused_meanwhile() -> None:
    """The first deliveries came 300 ms late, so the estimate read the clock 300 ms behind; the on-time samples after
    them are ahead of it by more than the latency window: refused until 5 in a row agree, then the estimate drops,
    the refused ones are taken and the episode goes on (moving ahead invalidates no frame already released)."""
    s = make()
    for t in range(0, 100 * MS, 10 * MS):
        s.push("joints", t, t, receive_ns=t + BEHIND + 300 * MS)
        if t % (30 * MS) == 0:
            s.push("cam", t, t, receive_ns=t + BEHIND + 300 * MS)
    assert s.clock.settled and s.clock.offset_ns == BEHIND + 300 * MS
    s.start(100 * MS + BEHIND + 300 * MS)
    frames = feed(s, 100, 3000)
    assert s.clock.offset_ns == BEHIND + 1 * MS
    assert s.rejected == {} and s.live.rejected == {}  # the 4 refused before the 5th confirmed were taken
    assert "estimate was lowered" in s.last_rejection
    assert s.report.features["joints"].samples == 290 and s.report.features["cam"].samples == 87
    frames += [f.slot for f in s.stop(3000 * MS + BEHIND + 300 * MS)]  # 2.9 s after the start, as it began
    assert frames == list(range(len(frames))) and len(frames) == 87
    assert s.report.frames_dropped == 0


def test_stamps_leaping_ahead_beyond_clock_jump_still_end_the_episode() -> None:
    """A confirmed jump of the stamps' clock beyond clock_jump_s either way is a clock reset (the frames after it
    would not follow on from the ones before): the episode ends there, its frames kept."""
    s = make()
    feed(s, 0, 100)
    s.start(100 * MS + BEHIND)
    feed(s, 100, 1000)
    with pytest.raises(ClockJumpError, match=r"3\.000 s ahead of the previous clock.*clock was reset"):
        for i in range(20):
            t = 1000 * MS + i * 10 * MS
            s.push("joints", t + 3 * NS, i, receive_ns=t + BEHIND + 1 * MS)
    assert s.rejected.get("future", 0) >= 1


def _push_both(s: LiveSampler, start_ms: int, end_ms: int, stamp_ahead_ns: int) -> None:
    """Joints every 10 ms and the camera every ~33 ms in [start_ms, end_ms), stamped `stamp_ahead_ns` ahead."""
    for t in range(start_ms * MS, end_ms * MS, 10 * MS):
        receive = t + BEHIND + 1 * MS
        s.push("joints", t + stamp_ahead_ns, t, receive_ns=receive)
        if t % (30 * MS) == 0:
            s.push("cam", t + stamp_ahead_ns, t, receive_ns=receive)
        s.poll(receive)


def test_the_estimate_rises_again_after_stamps_ahead_moved_it_down() -> None:
    """Both topics stamped 0.9 s ahead for 2 s move the estimate 0.9 s down (five samples agree); when the stamps
    are right again, every delivery sits 0.9 s behind that estimate: within two windows (4 s) the estimate is the
    true offset again and an episode gets its frames. An estimate that only falls read the clock 0.9 s ahead for
    good: every later sample fell before each episode's start, and the episodes stayed empty."""
    s = make()
    _push_both(s, 0, 1000, 0)
    assert s.clock.offset_ns == BEHIND + 1 * MS
    _push_both(s, 1000, 3000, 900 * MS)
    assert s.clock.offset_ns == BEHIND + 1 * MS - 900 * MS
    _push_both(s, 3000, 8000, 0)
    assert s.clock.offset_ns == BEHIND + 1 * MS
    s.start(8000 * MS + BEHIND + 1 * MS)
    frames = feed(s, 8000, 9000)
    frames += [f.slot for f in s.stop(9000 * MS + BEHIND + 1 * MS)]
    assert len(frames) >= 29 and frames == list(range(len(frames)))


def test_the_estimate_follows_a_transport_delay_that_grew() -> None:
    """Deliveries 1 ms late, then 40 ms late for good (a loaded link): the estimate follows up within two windows,
    so the clock's reading no longer runs ahead of the stamps by the difference."""
    s = make()
    feed(s, 0, 1000)
    assert s.clock.offset_ns == BEHIND + 1 * MS
    feed(s, 1000, 6000, behind=BEHIND + 39 * MS)
    assert s.clock.offset_ns == BEHIND + 40 * MS
