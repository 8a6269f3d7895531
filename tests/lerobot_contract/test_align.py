"""The alignment rule: frame 0 holds real data, hold = newest sample at or before the frame time, no future."""

from __future__ import annotations

import pytest

from lerobot_contract.align import AlignedFrame, Aligner, AlignFeature, frame_time
from lerobot_contract.errors import NonMonotonicStampError

MS = 1_000_000


def _run(aligner: Aligner, samples: list[tuple[str, int, object]]) -> list[AlignedFrame]:
    frames: list[AlignedFrame] = []
    for key, stamp, payload in samples:
        frames.extend(aligner.push(key, stamp, payload))
    frames.extend(aligner.finish())
    return frames


def _payloads(frames: list[AlignedFrame], key: str) -> list[object]:
    return [f.picks[key].sample.payload for f in frames]


def test_frame_time_is_exact_on_the_grid() -> None:
    assert frame_time(0, 0, 30) == 0
    assert frame_time(0, 1, 30) == 33_333_333
    assert frame_time(0, 2, 30) == 66_666_667
    assert frame_time(5, 30, 30) == 1_000_000_005


def test_frame_zero_is_where_every_feature_has_data() -> None:
    aligner = Aligner([AlignFeature("a"), AlignFeature("b")], fps=10)
    samples = [("a", t * MS, t) for t in range(0, 1001, 50)] + [("b", t * MS, -t) for t in range(230, 1001, 100)]
    samples.sort(key=lambda s: s[1])
    frames = _run(aligner, samples)
    assert frames[0].time_ns == 230 * MS
    assert frames[0].picks["b"].sample.payload == -230
    assert frames[0].picks["a"].sample.payload == 200  # newest a at or before 230 ms
    assert aligner.report.t0_ns == 230 * MS


def test_sample_exactly_at_frame_time_belongs_to_that_frame() -> None:
    aligner = Aligner([AlignFeature("a")], fps=10)
    frames = _run(aligner, [("a", t * MS, t) for t in (0, 99, 100, 101, 200, 250, 300)])
    assert [f.time_ns // MS for f in frames] == [0, 100, 200, 300]
    assert _payloads(frames, "a") == [0, 100, 200, 300]


def test_hold_never_takes_a_sample_from_the_future() -> None:
    aligner = Aligner([AlignFeature("a"), AlignFeature("b")], fps=10)
    samples = [("a", t * MS, t) for t in range(0, 501, 10)] + [("b", t * MS, t) for t in (0, 101, 199, 310, 500)]
    samples.sort(key=lambda s: s[1])
    frames = _run(aligner, samples)
    assert _payloads(frames, "b") == [0, 0, 199, 199, 310, 500]
    for frame in frames:
        for pick in frame.picks.values():
            assert pick.stamp_ns <= frame.time_ns


def test_nearest_and_linear_look_ahead_and_linear_only_for_vectors() -> None:
    samples = [("a", 0, 0.0), ("img", 0, "i0"), ("a", 80 * MS, 8.0), ("img", 70 * MS, "i1")]
    samples += [("a", 200 * MS, 20.0), ("img", 200 * MS, "i2")]
    nearest = _run(Aligner([AlignFeature("a"), AlignFeature("img")], fps=10, mode="nearest"), samples)
    assert _payloads(nearest, "a") == [0.0, 8.0, 20.0]
    assert _payloads(nearest, "img") == ["i0", "i1", "i2"]
    features = [AlignFeature("a", interpolate=True), AlignFeature("img")]
    linear = _run(Aligner(features, fps=10, mode="linear"), samples)
    pick = linear[1].picks["a"]
    assert pick.after is not None and pick.alpha == pytest.approx(20 / 120)
    assert linear[1].picks["img"].after is None and linear[1].picks["img"].sample.payload == "i1"


def test_nearest_tie_goes_to_the_past() -> None:
    frames = _run(
        Aligner([AlignFeature("a")], fps=10, mode="nearest"), [("a", 0, 0), ("a", 50 * MS, 5), ("a", 150 * MS, 15)]
    )
    assert _payloads(frames, "a") == [0, 5]


def test_stale_and_tolerance_drops_are_counted() -> None:
    aligner = Aligner([AlignFeature("a", max_age_ns=30 * MS), AlignFeature("b")], fps=10, tolerance_ns=60 * MS)
    samples = [("a", t * MS, t) for t in (0, 100, 200, 390, 400, 500)]
    samples += [("b", t * MS, t) for t in (0, 100, 130, 200, 300, 430, 500)]
    samples.sort(key=lambda s: s[1])
    frames = _run(aligner, samples)
    # 300: a is 100 ms old -> stale; 400: b is from 300, spread 100 ms > 60 -> tolerance.
    assert [f.time_ns // MS for f in frames] == [0, 100, 200, 500]
    report = aligner.report
    assert (report.frames_dropped_stale, report.frames_dropped_tolerance) == (1, 1)
    assert report.features["a"].stale_drops == 1
    assert report.slots == 6 and report.frames_kept == 4
    assert report.coverage == pytest.approx(4 / 6)
    assert report.as_dict()["features"]["b"]["max_skew_s"] == pytest.approx(0.0)


def test_last_frame_is_at_or_before_the_earliest_last_sample() -> None:
    aligner = Aligner([AlignFeature("a"), AlignFeature("b")], fps=10)
    samples = [("a", t * MS, t) for t in range(0, 1001, 10)] + [("b", t * MS, t) for t in (0, 250)]
    samples.sort(key=lambda s: s[1])
    frames = _run(aligner, samples)
    assert frames[-1].time_ns == 200 * MS


def test_non_monotonic_stamps_raise() -> None:
    aligner = Aligner([AlignFeature("a")], fps=10)
    list(aligner.push("a", 100 * MS, 0))
    with pytest.raises(NonMonotonicStampError, match=r"goes back 0\.050000 s"):
        list(aligner.push("a", 50 * MS, 1))


def test_frames_stream_out_before_the_end_and_buffers_stay_small() -> None:
    aligner = Aligner([AlignFeature("a"), AlignFeature("b")], fps=100)
    released = 0
    for t in range(0, 10_000, 5):
        released += len(list(aligner.push("a", t * MS, t)))
        released += len(list(aligner.push("b", t * MS, t)))
        assert max(len(b) for b in aligner._buffers.values()) <= 3
    assert released >= 995


def test_silent_feature_forces_release_instead_of_unbounded_buffering() -> None:
    aligner = Aligner([AlignFeature("a", max_age_ns=50 * MS), AlignFeature("b")], fps=10, max_lag_ns=200 * MS)
    list(aligner.push("b", 0, 0))
    list(aligner.push("a", 0, 0))
    frames = []
    for t in range(10, 3000, 10):
        frames.extend(aligner.push("b", t * MS, t))
        assert len(aligner._buffers["b"]) <= 22
    assert aligner.report.forced_releases > 0
    assert frames[0].time_ns == 0 and aligner.report.frames_dropped_stale > 0
