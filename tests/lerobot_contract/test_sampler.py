"""LiveSampler: the hold rule live, staleness/sync drops, latency release, clock jumps, bounded memory."""

from __future__ import annotations

import pytest

from lerobot_contract.align import Aligner, AlignFeature
from lerobot_contract.errors import ClockJumpError
from lerobot_contract.sampler import LiveSampler

MS = 1_000_000


def make(max_age_ms: float | None = None, tol_ms: float | None = None, **kw: int) -> LiveSampler:
    age = None if max_age_ms is None else int(max_age_ms * MS)
    feats = [AlignFeature("joints", max_age_ns=age), AlignFeature("cam", max_age_ns=age)]
    return LiveSampler(feats, fps=10, tolerance_ns=None if tol_ms is None else int(tol_ms * MS), **kw)


def test_hold_rule_exact_stamp_belongs_to_its_frame_and_nothing_from_the_future() -> None:
    s = make(latency_ns=0)
    s.start(0)
    s.push("joints", 5 * MS, "j5")  # first samples: t0 = max(5, 20) ms
    s.push("cam", 20 * MS, "c20")
    s.push("joints", 120 * MS, "j120")  # exactly at frame 1 (20 + 100 ms)
    s.push("cam", 121 * MS, "c121")  # after frame 1: must not be used by it
    frames = s.poll(200 * MS)
    assert [f.time_ns for f in frames] == [20 * MS, 120 * MS]
    assert frames[0].picks["joints"].sample.payload == "j5"
    assert frames[1].picks["joints"].sample.payload == "j120"
    assert frames[1].picks["cam"].sample.payload == "c20"


def test_waits_for_latency_unless_every_feature_is_past_the_frame() -> None:
    s = make(latency_ns=50 * MS)
    s.start(0)
    s.push("joints", 0, 0)
    s.push("cam", 0, 0)
    assert [f.slot for f in s.poll(10 * MS)] == []  # frame 0 might still get a sample stamped 0
    s.push("joints", 1 * MS, 1)
    s.push("cam", 1 * MS, 1)
    assert [f.slot for f in s.poll(10 * MS)] == [0]  # both topics are past t=0
    assert s.poll(120 * MS) == []  # frame 1 at 100 ms: due at 150 ms
    assert [f.slot for f in s.poll(150 * MS)] == [1]


def test_paused_publisher_frames_are_dropped_as_stale_and_counted() -> None:
    s = make(max_age_ms=150, latency_ns=0)
    s.start(0)
    for t in range(0, 1000, 10):
        s.push("joints", t * MS, t)
        if t < 300 or t >= 700:  # the camera pauses 0.3 .. 0.7 s
            s.push("cam", t * MS, t)
    frames = s.poll(990 * MS)
    kept = [f.time_ns // MS for f in frames]
    assert kept == [0, 100, 200, 300, 400, 700, 800, 900]  # 400 holds the 290 ms image (110 ms old)
    assert s.report.frames_dropped_stale == 2
    assert s.report.features["cam"].stale_drops == 2
    assert s.report.features["joints"].stale_drops == 0


def test_sync_tolerance_drops_frames_whose_samples_are_far_apart() -> None:
    s = make(tol_ms=30, latency_ns=0)
    s.start(0)
    s.push("joints", 0, 0)
    s.push("cam", 0, 0)
    s.push("joints", 100 * MS, 1)
    s.push("cam", 60 * MS, 1)  # 40 ms apart at frame 1
    s.push("cam", 200 * MS, 2)
    s.push("joints", 200 * MS, 2)
    frames = s.poll(200 * MS)
    assert [f.slot for f in frames] == [0, 2]
    assert s.report.frames_dropped_tolerance == 1


def test_samples_before_the_start_are_not_used_and_late_samples_are_counted() -> None:
    s = make(latency_ns=0)
    s.push("joints", 0, "old")
    s.start(50 * MS)
    s.push("cam", 40 * MS, "before")
    s.push("joints", 60 * MS, "j60")
    s.push("cam", 70 * MS, "c70")
    frames = s.poll(300 * MS)
    assert frames[0].time_ns == 70 * MS
    assert frames[0].picks["joints"].sample.payload == "j60"
    assert s.live.ignored_before_start == 1
    s.push("joints", 100 * MS, "late")  # frames up to 270 ms were sampled already
    assert s.live.late_samples == 1


def test_clock_jump_back_raises_small_reordering_is_ignored() -> None:
    s = make(latency_ns=0)
    s.start(0)
    s.push("joints", 5_005 * MS, 0)
    s.push("joints", 5_004 * MS, 0)
    assert s.live.out_of_order == 1
    with pytest.raises(ClockJumpError, match="clock was reset"):
        s.push("joints", 2_005 * MS, 0)
    s.poll(10_000 * MS)
    with pytest.raises(ClockJumpError, match="went back"):
        s.poll(1_000 * MS)


def test_memory_is_bounded_when_frames_cannot_be_sampled() -> None:
    s = make(latency_ns=0, max_samples=8)
    s.start(0)
    for t in range(1000):
        s.push("joints", t * MS, t)  # the camera never publishes: no frame 0, buffers must not grow
    assert len(s._buffers["joints"]) == 8
    assert s.live.overflow == 992
    assert s.waiting_for == ["cam"]


def test_same_frames_as_the_bag_aligner_on_the_same_stream() -> None:
    feats = [AlignFeature("joints", max_age_ns=40 * MS), AlignFeature("cam", max_age_ns=40 * MS)]
    live = LiveSampler(feats, fps=30, latency_ns=20 * MS)
    offline = Aligner(feats, fps=30)
    live.start(3 * MS)
    stream = [("joints", t * 10 * MS + 1 * MS) for t in range(100)]
    stream += [("cam", round(t * 1e9 / 30) + 7 * MS) for t in range(30) if not 10 <= t < 14]
    stream.sort(key=lambda item: item[1])
    got = []
    off = []
    for key, stamp in stream:
        if stamp >= 3 * MS:
            off.extend(offline.push(key, stamp, stamp))
        live.push(key, stamp, stamp)
        got.extend(live.poll(stamp))
    got.extend(live.stop(stream[-1][1]))
    off.extend(offline.finish())
    assert [(f.time_ns, {k: p.sample.payload for k, p in f.picks.items()}) for f in got] == [
        (f.time_ns, {k: p.sample.payload for k, p in f.picks.items()}) for f in off
    ]
    assert live.report.frames_dropped_stale == offline.report.frames_dropped_stale > 0


def test_stamps_on_another_clock_are_released_by_the_offset_not_early() -> None:
    s = make(max_age_ms=100, latency_ns=50 * MS)
    behind = 5_000 * MS  # the stamps run 5 s behind the recorder's clock (device clock, sim time)
    s.push("joints", 10 * MS, 0, receive_ns=10 * MS + behind + 1 * MS)
    assert s.start(behind) == -1 * MS  # the episode start on the stamps' clock
    for t in range(0, 200, 10):
        s.push("joints", t * MS, t, receive_ns=t * MS + behind + 1 * MS)
        s.push("cam", t * MS, t, receive_ns=t * MS + behind + 1 * MS)
    frames = s.poll(190 * MS + behind + 1 * MS)
    assert [f.slot for f in frames] == [0, 1]  # frame 2 (200 ms) is neither complete nor due (250 ms)
    assert s.report.frames_dropped == 0
