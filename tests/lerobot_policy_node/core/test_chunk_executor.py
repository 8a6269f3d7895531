"""The chunk executor on scripted timelines (integer nanoseconds, no ROS)."""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import pytest

from lerobot_policy_node.core.errors import ChunkRejected, PolicyConfigError
from lerobot_policy_node.core.executor import (
    NS,
    BlendMode,
    Chunk,
    ChunkExecutor,
    ExecutorConfig,
    StarvationMode,
)
from lerobot_policy_node.core.scheduling import InferenceScheduler, SchedulerConfig

JOINTS = ("a", "b")
PERIOD = NS // 30
MS = 1_000_000


def ramp_chunk(stamp_ns: int, horizon: int = 30, slope: float = 1.0, offset: float = 0.0, chunk_id: int = 0) -> Chunk:
    """Joint a follows `offset + slope * t` (t in s since 0), joint b its negative: step k at stamp + k * PERIOD."""
    times = (stamp_ns + np.arange(horizon) * PERIOD) / NS
    values = offset + slope * times
    return Chunk(stamp_ns, PERIOD, np.stack([values, -values], axis=1), chunk_id)


def executor(**kw) -> ChunkExecutor:
    return ChunkExecutor(ExecutorConfig(joint_names=JOINTS, **kw))


def test_latency_compensation_picks_the_step_for_now():
    ex = executor(blend=BlendMode.REPLACE)
    chunk = ramp_chunk(0)
    now = 5 * PERIOD  # arrives 5 steps late: steps 0..4 are in the past
    ex.submit(chunk, now)
    assert ex.target(now) == pytest.approx(chunk.actions[5])
    assert ex.stats.steps_dropped_late == 5
    assert ex.stats.last_latency_s == pytest.approx(5 * PERIOD / NS)
    # Between steps the target interpolates; at a step time it is that step.
    assert ex.target(7 * PERIOD) == pytest.approx(chunk.actions[7])
    assert ex.target(7 * PERIOD + PERIOD // 2) == pytest.approx((chunk.actions[7] + chunk.actions[8]) / 2, abs=1e-6)
    times, values = ex.trajectory(8 * PERIOD)
    assert times[0] == 8 * PERIOD and times[-1] == chunk.end_ns
    assert values[0] == pytest.approx(chunk.actions[8])
    assert len(times) == 30 - 8


def test_step_zero_in_the_near_future_is_held_until_due():
    ex = executor(blend=BlendMode.REPLACE, future_tolerance_s=0.05)
    chunk = ramp_chunk(100 * MS, offset=1.0)
    ex.submit(chunk, 90 * MS)
    assert ex.target(95 * MS) == pytest.approx(chunk.actions[0])


def continuous_run(blend: BlendMode, tick_ns: int, disagreement: float) -> ChunkExecutor:
    """Chunks every 10 steps, each disagreeing with the previous by `disagreement`; ticks every `tick_ns`."""
    ex = executor(blend=blend, crossfade_s=0.1, ensemble_coeff=0.01)
    ex.reset([0.1, -0.1], 0)  # where the first chunk is when it arrives
    t = 0
    for i in range(8):
        stamp = i * 10 * PERIOD
        arrival = stamp + 3 * PERIOD  # inference + transport: 3 steps late
        while t < arrival:
            ex.target(t)
            t += tick_ns
        ex.submit(ramp_chunk(stamp, offset=(i % 2) * disagreement, chunk_id=i), arrival)
    while t < 8 * 10 * PERIOD + 10 * PERIOD:
        ex.target(t)
        t += tick_ns
    return ex


@pytest.mark.parametrize("tick_ns", [10 * MS, PERIOD])
def test_crossfade_is_continuous_at_every_boundary(tick_ns):
    # Consecutive chunks disagree by 0.05 while the motion inside a chunk is 1 unit/s: a replace would jump by 0.05.
    ex = continuous_run(BlendMode.CROSSFADE, tick_ns, 0.05)
    inner = ex.stats.max_inner_step
    assert inner == pytest.approx(tick_ns / NS, rel=0.2)  # the ramp's own step per tick
    # Bounded: the fade adds the disagreement spread over the blend to the ramp's own step (a replace adds all
    # of it in one tick, 6x the inner step here).
    assert ex.stats.max_boundary_step <= inner * 2.0
    assert ex.stats.starvation_events == 0


@pytest.mark.parametrize("tick_ns", [10 * MS, PERIOD])
def test_temporal_ensemble_bounds_every_step(tick_ns):
    # As in ACT, each prediction moves the mean by its weight: about half the disagreement for a second one, spread
    # over the first period at a boundary, and again where the older chunk ends inside the plan.
    ex = continuous_run(BlendMode.ENSEMBLE, tick_ns, 0.05)
    largest = max(ex.stats.max_boundary_step, ex.stats.max_inner_step)
    assert largest <= tick_ns / NS + 0.6 * 0.05
    replaced = continuous_run(BlendMode.REPLACE, tick_ns, 0.05)
    assert largest < replaced.stats.max_boundary_step
    assert ex.stats.starvation_events == 0


def test_replace_jumps_by_the_disagreement():
    ex = continuous_run(BlendMode.REPLACE, 10 * MS, 0.05)
    assert ex.stats.max_boundary_step > ex.stats.max_inner_step + 0.04
    assert ex.stats.max_boundary_step > 2.0 * ex.stats.max_inner_step


@pytest.mark.parametrize("blend", [BlendMode.RTC, BlendMode.CROSSFADE, BlendMode.ENSEMBLE])
def test_rtc_takes_the_new_chunk_over_without_blending(blend):
    """In rtc mode the policy already made the chunk continue the old one: from its arrival on, the plan is the new
    chunk itself (the blending modes are the control: they do not follow it at once)."""
    ex = executor(blend=blend, crossfade_s=0.2)
    ex.submit(ramp_chunk(0, offset=0.0), 0)
    new = ramp_chunk(100 * MS, offset=0.5, chunk_id=1)
    now = 150 * MS
    ex.submit(new, now)
    ticks = [now + k * PERIOD // 3 for k in range(12)]
    expected = [np.interp(t, new.stamp_ns + np.arange(30) * PERIOD, new.actions[:, 0]) for t in ticks]
    followed = np.allclose([ex.target(t)[0] for t in ticks], expected, atol=1e-9)
    assert followed is (blend is BlendMode.RTC)


def test_rtc_fades_in_a_chunk_with_nothing_to_continue():
    """The first chunk (and one after starvation) was not inpainted from a previous one: it fades in, no jump."""
    ex = executor(blend=BlendMode.RTC, crossfade_s=0.2)
    ex.reset([0.3, -0.3], 0)
    ex.submit(ramp_chunk(0, offset=1.0), 0)
    assert ex.target(0) == pytest.approx([0.3, -0.3])
    assert ex.target(200 * MS) == pytest.approx([1.2, -1.2], abs=1e-6)
    late = 2 * NS  # past the end of the first chunk: starved
    ex.target(late)
    ex.submit(ramp_chunk(late - 100 * MS, offset=3.0, chunk_id=1), late)
    assert ex.target(late)[0] == pytest.approx(1.0 + 29 * PERIOD / NS)  # the held end of the first chunk


def test_first_chunk_blends_from_the_measured_pose():
    ex = executor(blend=BlendMode.CROSSFADE, crossfade_s=0.2)
    ex.reset([0.3, -0.3], 0)
    ex.submit(ramp_chunk(0, offset=1.0), 0)
    assert ex.target(0) == pytest.approx([0.3, -0.3])
    mid = ex.target(100 * MS)
    assert 0.3 < mid[0] < 1.1
    assert ex.target(200 * MS) == pytest.approx([1.2, -1.2], abs=1e-6)


def test_temporal_ensemble_weights_follow_act():
    ex = executor(blend=BlendMode.ENSEMBLE, ensemble_coeff=0.5)
    horizon = 10
    first = Chunk(0, PERIOD, np.zeros((horizon, 2)))
    second = Chunk(PERIOD, PERIOD, np.ones((horizon, 2)))
    ex.submit(first, 0)
    ex.submit(second, PERIOD)
    # At step 2 (predicted by both): ACT weights exp(-0.5 * i), i = 0 for the oldest prediction.
    w0, w1 = 1.0, math.exp(-0.5)
    assert ex.plan.value_at(2 * PERIOD) == pytest.approx([w1 / (w0 + w1)] * 2)
    # Past the first chunk's end only the second predicted: its value.
    assert ex.plan.value_at(horizon * PERIOD) == pytest.approx([1.0, 1.0])


def run_timeline(factor: float, workers: int, horizon: int = 30) -> tuple[ChunkExecutor, int]:
    """Scheduler + executor: inference takes `factor` x the chunk; chunks arrive `delay` after their observation."""
    duration = horizon * PERIOD
    delay = int(factor * duration)
    scheduler = InferenceScheduler(SchedulerConfig(threshold=0.0, margin_s=0.02))
    scheduler.record_inference(delay / NS)  # the node's warm-up inference
    ex = executor(blend=BlendMode.CROSSFADE)
    ex.reset([0.0, 0.0], 0)
    pending: list[tuple[int, int, Chunk]] = []
    t = 0
    while t < 10 * duration:
        for item in [p for p in pending if t >= p[0]]:
            pending.remove(item)
            try:
                ex.submit(item[2], t)
                published = True
            except ChunkRejected as err:
                assert err.reason == "stale"
                published = False
            scheduler.inference_finished(item[1], delay / NS, published)
        observation = t - t % PERIOD  # newest frame on the grid
        if scheduler.should_start(t, workers) and scheduler.check_observation(observation, t).value == "ok":
            scheduler.inference_started(observation, PERIOD, horizon)
            pending.append((t + delay, observation, ramp_chunk(observation, horizon)))
        ex.target(t)
        t += 10 * MS
    return ex, t


@pytest.mark.parametrize(("factor", "workers"), [(0.2, 1), (0.4, 1), (0.8, 8)])
def test_no_starvation_while_inference_is_faster_than_the_chunk(factor, workers):
    ex, t = run_timeline(factor, workers)
    assert ex.stats.chunks_accepted > 5
    assert ex.stats.starvation_events == 0  # waiting for the first chunk is not starvation
    assert ex.starvation_s(t) == 0.0


@pytest.mark.parametrize(("factor", "workers"), [(0.8, 1), (1.5, 8)])
def test_starvation_is_reported_when_inference_cannot_keep_up(factor, workers):
    ex, t = run_timeline(factor, workers)
    assert ex.stats.starvation_events > 0 and ex.starvation_s(t) > 0


def test_hold_on_starvation_and_decelerate_option():
    ex = executor(blend=BlendMode.REPLACE)
    chunk = ramp_chunk(0, horizon=10)
    ex.submit(chunk, 0)
    end = chunk.end_ns
    assert not ex.starved
    held = ex.target(end + 50 * MS)
    assert ex.starved and ex.stats.starvation_events == 1
    assert held == pytest.approx(chunk.actions[-1])
    assert ex.target(end + 500 * MS) == pytest.approx(chunk.actions[-1])
    assert ex.starvation_s(end + 500 * MS) == pytest.approx(0.5)
    ex.submit(ramp_chunk(end + 500 * MS), end + 500 * MS)
    assert not ex.starved and ex.stats.starvation_ns == 500 * MS

    dec = executor(blend=BlendMode.REPLACE, starvation=StarvationMode.DECELERATE, deceleration_s=0.2)
    dec.submit(chunk, 0)
    positions = [dec.target(end + k * 20 * MS)[0] for k in range(20)]
    steps = np.diff(positions)
    assert np.all(steps >= -1e-12) and np.all(np.diff(steps) <= 1e-12)  # slowing down, never reversing
    assert positions[-1] == pytest.approx(chunk.actions[-1][0] + 1.0 * 0.2 / 2)  # v * T / 2 further
    assert positions[-1] == positions[-2]


@pytest.mark.parametrize(
    ("actions", "reason"),
    [
        (np.full((5, 2), math.nan), "non_finite"),
        (np.array([[0.0, math.inf]] * 5), "non_finite"),
        (np.zeros((5, 3)), "shape"),
        (np.zeros((0, 2)), "shape"),
    ],
)
def test_bad_chunks_are_rejected_and_the_plan_holds(actions, reason):
    ex = executor()
    good = ramp_chunk(0)
    ex.submit(good, 0)
    before = ex.target(3 * PERIOD)
    with pytest.raises(ChunkRejected) as info:
        ex.submit(Chunk(3 * PERIOD, PERIOD, actions, 7), 3 * PERIOD)
    assert info.value.reason == reason
    assert ex.stats.chunks_rejected == {reason: 1} and "chunk 7" in ex.stats.last_rejection
    assert ex.target(4 * PERIOD) == pytest.approx(good.actions[4])
    assert np.all(np.isfinite(before))


def test_stale_and_future_chunks_are_rejected():
    ex = executor(future_tolerance_s=0.05)
    ex.reset([0.0, 0.0], 0)
    now = 10 * NS
    with pytest.raises(ChunkRejected, match="in the future") as info:
        ex.submit(ramp_chunk(now + 200 * MS), now)
    assert info.value.reason == "future"
    with pytest.raises(ChunkRejected, match="ended") as info:
        ex.submit(ramp_chunk(now - 2 * NS), now)
    assert info.value.reason == "stale"
    assert ex.target(now) == pytest.approx([0.0, 0.0])


def test_limits_and_max_velocity_clip_every_output():
    ex = executor(lower=(-0.5, -0.5), upper=(0.5, 0.5), max_velocity=1.0, blend=BlendMode.REPLACE)
    ex.reset([0.0, 0.0], 0)
    wild = Chunk(0, PERIOD, np.array([[3.0, -3.0]] * 30), 1)
    ex.submit(wild, 0)
    assert ex.stats.clipped_values == 60
    outputs = [ex.target(k * 10 * MS) for k in range(100)]
    assert all(np.all(np.abs(o) <= 0.5 + 1e-12) for o in outputs)
    assert max(np.max(np.abs(b - a)) for a, b in itertools.pairwise(outputs)) <= 1.0 * 0.01 + 1e-12
    assert outputs[-1] == pytest.approx([0.5, -0.5])
    _, values = ex.trajectory(0)
    assert np.all(np.abs(values) <= 0.5 + 1e-12)


def test_a_late_tick_moves_at_most_one_velocity_window_never_a_jump():
    """Issue 18 under load: the first tick came 82 ms after the chunk was taken (seeded from the measured pose), and
    the velocity limit, applied over the whole gap, let the first command step 0.16 rad at once. Nothing was sent in
    that gap, so the robot still held the previous command: one command may cover at most `velocity_window_s`."""
    ex = executor(max_velocity=2.0, velocity_window_s=0.04, blend=BlendMode.REPLACE)
    ex.reset([0.0, 0.0], 0)
    ex.submit(Chunk(0, PERIOD, np.array([[3.0, -3.0]] * 30), 1), 0)
    first = ex.target(82 * MS)
    assert np.max(np.abs(first)) == pytest.approx(2.0 * 0.04)
    second = ex.target(92 * MS)  # on time again: max_velocity x 10 ms
    assert np.max(np.abs(second - first)) == pytest.approx(2.0 * 0.01)
    _, values = ex.trajectory(1082 * MS)  # a 1 s stall: the plan's first point starts one window away too
    assert np.max(np.abs(values[0] - second)) == pytest.approx(2.0 * 0.04)
    with pytest.raises(PolicyConfigError, match="velocity_window_s"):
        executor(velocity_window_s=-1.0)


def test_software_stop_holds_and_refuses_chunks_until_enabled():
    ex = executor(blend=BlendMode.CROSSFADE)
    chunk = ramp_chunk(0)
    ex.submit(chunk, 0)
    ex.target(5 * PERIOD)
    held = ex.hold(5 * PERIOD)
    assert held == pytest.approx(chunk.actions[5])
    with pytest.raises(ChunkRejected) as info:
        ex.submit(ramp_chunk(6 * PERIOD), 6 * PERIOD)
    assert info.value.reason == "disabled"
    assert ex.target(20 * PERIOD) == pytest.approx(held)
    assert not ex.starved  # a stop is not starvation
    times, values = ex.trajectory(20 * PERIOD)
    assert len(times) == 1 and values[0] == pytest.approx(held)
    ex.enable()
    ex.submit(ramp_chunk(20 * PERIOD), 20 * PERIOD)
    assert ex.target(20 * PERIOD) == pytest.approx(held)  # crossfades from the held pose


def test_enable_restarts_from_the_measured_pose_without_counting_the_wait_as_starvation():
    ex = executor(blend=BlendMode.CROSSFADE, crossfade_s=0.1)
    ex.submit(ramp_chunk(0), 0)
    ex.target(5 * PERIOD)
    ex.hold(5 * PERIOD)
    moved = np.array([3.0, -2.0])  # teleoperation or a simulation reset moved the robot while stopped
    ex.enable(moved, 40 * PERIOD)
    assert ex.target(41 * PERIOD) == pytest.approx(moved)  # holds where the robot is, no jump back
    assert not ex.starved and ex.starvation_s(50 * PERIOD) == 0.0  # waiting for the first chunk is not starvation
    chunk = ramp_chunk(50 * PERIOD)
    ex.submit(chunk, 50 * PERIOD)
    assert ex.target(50 * PERIOD) == pytest.approx(moved)  # the new chunk fades in from the measured pose
    assert ex.target(50 * PERIOD + NS // 10) == pytest.approx(chunk.actions[3])
    ex.target(80 * PERIOD)  # the chunk ran out: from now on a missing chunk is starvation again
    assert ex.starved


def test_clock_jumping_back_drops_the_plan_and_holds():
    ex = executor(clock_jump_s=0.1)
    chunk = ramp_chunk(100 * NS)
    ex.submit(chunk, 100 * NS)
    last = ex.target(100 * NS + 5 * PERIOD)
    assert ex.target(100 * NS + 5 * PERIOD - 50 * MS) == pytest.approx(last)  # small step back: time stands still
    assert ex.target(1 * NS) == pytest.approx(last)  # sim reset
    assert ex.stats.clock_jumps == 1 and ex.plan is None
    ex.submit(ramp_chunk(1 * NS), 1 * NS)
    assert ex.target(1 * NS) == pytest.approx(last)  # blends from where it stopped


def test_config_validation_names_the_field():
    with pytest.raises(PolicyConfigError, match="upper"):
        ExecutorConfig(joint_names=JOINTS, upper=(1.0,))
    with pytest.raises(PolicyConfigError, match="lower/upper"):
        ExecutorConfig(joint_names=JOINTS, lower=(1.0, 1.0), upper=(0.0, 0.0))
    with pytest.raises(PolicyConfigError, match="crossfade_s"):
        ExecutorConfig(joint_names=JOINTS, crossfade_s=0.0)
    with pytest.raises(ValueError):
        ExecutorConfig(joint_names=JOINTS, blend="spline")


def traced_lines(call) -> int:
    """Python lines `call()` executes (numpy's Python wrappers included): a per-step loop shows up here."""
    lines = 0

    def tracer(frame, event, arg):
        nonlocal lines
        lines += event == "line"
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(previous)
    return lines


@pytest.mark.parametrize("blend", list(BlendMode))
def test_the_tick_and_the_handover_do_the_same_work_for_10_and_100000_steps(blend):
    """Taking a chunk over is split so that a tick thread never does O(horizon) work: `handover` and `install`
    (under the caller's lock) and `target` (every tick) run the same Python lines whatever the horizon; only
    `prepare` (any thread, no lock) grows with it."""
    work = {}
    for horizon in (10, 100_000):
        ex = executor(blend=blend, max_velocity=5.0, velocity_window_s=0.02, max_chunk_steps=200_000)
        ex.reset([0.0, 0.0], 0)
        ex.submit(ramp_chunk(0, horizon=horizon), 0)  # a plan of `horizon` steps to blend with and replace
        now = 2 * PERIOD
        counts = {"handover": traced_lines(lambda ex=ex, now=now: ex.handover(now))}
        handover = ex.handover(now)
        prepared = ex.prepare(ramp_chunk(PERIOD, horizon=horizon, offset=0.5, chunk_id=1), handover)
        counts["install"] = traced_lines(lambda ex=ex, p=prepared: ex.install(p))
        assert ex.plan is prepared.plan
        counts["target"] = traced_lines(lambda ex=ex, now=now: ex.target(now + PERIOD // 2))
        counts["trajectory_start"] = traced_lines(lambda ex=ex, now=now: ex.trajectory_start(now + PERIOD))
        work[horizon] = counts
    assert work[10] == work[100_000]


def test_a_plan_prepared_against_a_plan_that_is_gone_is_not_installed():
    """A stop, a reset or a clock jump between `handover` and `install`: the prepared plan blended from a plan
    that is no longer executed, so `install` declines it (the caller prepares it again) or refuses it (stopped)."""
    ex = executor()
    ex.submit(ramp_chunk(0), 0)
    prepared = ex.prepare(ramp_chunk(PERIOD, chunk_id=1), ex.handover(PERIOD))
    ex.reset([0.3, -0.3], 2 * PERIOD)
    assert ex.install(prepared) is False and ex.stats.chunks_accepted == 1
    prepared = ex.prepare(ramp_chunk(2 * PERIOD, chunk_id=2), ex.handover(2 * PERIOD))
    ex.hold(3 * PERIOD)
    with pytest.raises(ChunkRejected) as info:
        ex.install(prepared)
    assert info.value.reason == "disabled" and ex.plan is None
    ex.enable()
    ex.submit(ramp_chunk(4 * PERIOD, chunk_id=3), 4 * PERIOD)
    assert ex.stats.chunks_accepted == 2


def test_vectorised_blends_match_the_plan_lookups():
    """`values_at` / `counts_at` (the blends' vectorised lookups) agree with `value_at` / `count_at`."""
    ex = executor(blend=BlendMode.ENSEMBLE)
    ex.submit(ramp_chunk(0), 0)
    ex.submit(ramp_chunk(3 * PERIOD, offset=0.2, chunk_id=1), 4 * PERIOD)
    plan = ex.plan
    probe = np.concatenate(([-PERIOD, 0], plan.times_ns, plan.times_ns + PERIOD // 3, [plan.end_ns + NS]))
    assert np.array_equal(plan.values_at(probe), np.stack([plan.value_at(int(t)) for t in probe]))
    assert np.array_equal(plan.counts_at(probe), [plan.count_at(int(t)) for t in probe])
