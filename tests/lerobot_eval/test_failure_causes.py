"""Why an evaluated episode failed (lerobot_eval.failure_causes): the classification, the per-episode counters
from /diagnostics reports, and the stuck check on the sim's own clock."""

from __future__ import annotations

import pytest

from lerobot_eval.failure_causes import (
    EXECUTOR,
    LATE_OBSERVATIONS,
    LATE_START,
    POLICY,
    POLICY_FAILED,
    SIM,
    SIM_BEHIND,
    STARVED,
    CauseThresholds,
    DiagnosticsLog,
    EpisodeSignals,
    ProgressWatch,
    cause_counts,
    classify,
    diagnostics_source,
    episode_signals,
)

FPS = 30.0


def signals(**changes):
    base = {"fps": FPS, "steps": 600, "steps_before_control": 3, "wall_s": 597 / FPS, "chunk_steps": 900}
    return EpisodeSignals(**{**base, **changes})


def test_a_success_has_no_cause_and_a_clean_failure_is_the_policys():
    assert classify(True, signals(starvation_s=10.0)).cause == ""
    diagnosis = classify(False, signals())
    assert diagnosis.cause == POLICY_FAILED and diagnosis.causes == (POLICY_FAILED,)
    assert classify(False, None).cause == POLICY_FAILED  # lockstep: no real-time effects to blame


def test_starvation_is_named_with_the_share_of_the_episode_held():
    diagnosis = classify(False, signals(starvation_s=0.25 * 597 / FPS))
    assert diagnosis.cause == STARVED
    assert "executor held 25 % of the episode" in diagnosis.text.replace("25%", "25 %")


def test_a_sim_behind_real_time_comes_first_and_the_others_are_listed():
    # 597 controlled steps (19.9 s simulated) took 40 s of wall time: 0.5x real time, and the executor starved.
    diagnosis = classify(False, signals(wall_s=40.0, starvation_s=8.0, stale_observations=4))
    assert diagnosis.cause == SIM_BEHIND
    assert diagnosis.causes == (SIM_BEHIND, LATE_OBSERVATIONS, STARVED)
    assert "0.50x real time" in diagnosis.text


def test_late_observations_from_refusals_or_late_chunk_steps():
    assert classify(False, signals(stale_observations=1)).cause == LATE_OBSERVATIONS
    assert classify(False, signals(steps_dropped_late=300, chunk_steps=900)).cause == LATE_OBSERVATIONS
    # A chunk step or two dropped per chunk is latency compensation at work, not a cause.
    assert classify(False, signals(steps_dropped_late=60, chunk_steps=900)).cause == POLICY_FAILED


def test_a_late_first_chunk_is_named():
    diagnosis = classify(False, signals(steps_before_control=120, wall_s=480 / FPS))
    assert diagnosis.cause == LATE_START


def test_thresholds_are_checked():
    with pytest.raises(ValueError, match="starved_fraction"):
        CauseThresholds(starved_fraction=0.0)
    with pytest.raises(ValueError, match="stale_observations"):
        CauseThresholds(stale_observations=0)


def test_episode_counters_are_the_growth_between_the_reports_around_the_episode():
    log = DiagnosticsLog()
    # The executor reports once a second; the episode runs from 10.5 to 14.2 s.
    for t, starvation, late, rejected in [(9.9, 1.0, 5, 2), (10.9, 1.0, 6, 2), (13.9, 2.5, 40, 3), (14.9, 3.0, 42, 3)]:
        log.add(EXECUTOR, t, {"starvation_s": str(starvation), "steps_dropped_late": str(late), "chunks_accepted":
                              str(int(t)), "rejected_too_old": str(rejected), "rejected_disabled": "7",
                              "tick_jitter_p99_ms": "1.5", "output": "joint_trajectory"})  # fmt: skip
    log.add(POLICY, 10.0, {"stale_observations": "1", "observation_age_s": "0.02"})
    log.add(POLICY, 12.0, {"stale_observations": "4", "observation_age_s": "0.31"})
    log.add(POLICY, 15.0, {"stale_observations": "4", "observation_age_s": "0.03"})
    log.add(SIM, 12.0, {"real_time_factor": "0.62"})
    log.add(SIM, 13.0, {"real_time_factor": "0.0"})  # not measured yet: not a factor of 0
    s = episode_signals(log, start_s=10.5, end_s=14.2, fps=FPS, steps=111, steps_before_control=3, horizon=30,
                        latencies_s=[0.04, 0.05, 0.2])  # fmt: skip
    assert s.starvation_s == pytest.approx(2.0)  # 3.0 (first report after the end) - 1.0 (last before the start)
    assert s.steps_dropped_late == 37
    assert s.chunk_steps == (14 - 9) * 30
    assert s.chunks_rejected == {"too_old": 1}  # refusals while stopped (between episodes) are not the episode's
    assert s.stale_observations == 3
    assert s.observation_age_max_s == pytest.approx(0.31)
    assert s.sim_real_time_factor_min == pytest.approx(0.62)
    assert s.wall_s == pytest.approx(3.7)
    assert s.real_time_factor == pytest.approx(108 / FPS / 3.7)
    assert s.chunk_latency_p99_s > s.chunk_latency_p50_s == pytest.approx(0.05)
    assert log.reported_after(EXECUTOR, 14.2) and not log.reported_after(EXECUTOR, 15.0)


def test_reports_out_of_order_are_refused():
    log = DiagnosticsLog()
    log.add(SIM, 2.0, {})
    with pytest.raises(ValueError, match="before the previous one"):
        log.add(SIM, 1.0, {})


def test_status_names_map_to_their_node_and_robot():
    assert diagnostics_source("/follower/action_executor: action executor") == EXECUTOR
    assert diagnostics_source("/follower/sim_bridge: simulation") == SIM
    assert diagnostics_source("/policy: policy") == POLICY
    assert diagnostics_source("/robot_1/sim_bridge: simulation", "/robot_0") is None
    assert diagnostics_source("/robot_0/action_executor: action executor", "/robot_0") == EXECUTOR
    assert diagnostics_source("/follower/camera: frames") is None


def test_a_sim_slower_than_real_time_is_not_stuck_but_one_that_stops_is():
    """The episode's limit is its own steps: a sim at 0.2x real time takes 5x the episode's length in wall time
    and must not be given up on (the old supervisor deadline was 3x the episode length + 30 s of wall time)."""
    episode_s, steps = 20.0, 600
    watch = ProgressWatch(stall_s=30.0)
    now = 0.0
    for step in range(steps):  # one step every 5 control periods
        now = step * 5 / FPS
        watch.update(step, now)
        assert not watch.stuck(now)
    assert now > episode_s * 3 + 30.0
    assert not watch.stuck(now + 29.0)
    assert watch.stuck(now + 31.0)
    with pytest.raises(ValueError, match="stall_s"):
        ProgressWatch(0.0)


def test_cause_counts_counts_failures_only():
    rows = [{"success": False, "cause": STARVED}, {"success": True, "cause": ""}, {"success": False, "cause": STARVED},
            {"success": False, "cause": POLICY_FAILED}]  # fmt: skip
    assert cause_counts(rows) == {STARVED: 2, POLICY_FAILED: 1}
