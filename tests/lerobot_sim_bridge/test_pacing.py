"""Pacing cores: wall-clock deadlines, the lockstep gate, the real-time factor."""

import pytest

from lerobot_sim_bridge.errors import InvalidConfigError
from lerobot_sim_bridge.pacing import LockstepGate, PacingMode, RealTimeFactorMeter, RealTimePacer


def test_mode_parse_names_the_valid_modes():
    assert PacingMode.parse(" LockStep ") is PacingMode.LOCKSTEP
    with pytest.raises(InvalidConfigError, match="realtime, lockstep, fast"):
        PacingMode.parse("turbo")


def test_realtime_pacer_keeps_a_fixed_rate():
    pacer = RealTimePacer(period=0.1)
    assert pacer.delay(10.0) == 0.0
    pacer.stepped(10.0)
    assert pacer.delay(10.02) == pytest.approx(0.08)
    pacer.stepped(10.1)
    # A late step does not shift the schedule: the next deadline is still on the 0.1 s grid.
    assert pacer.delay(10.15) == pytest.approx(0.05)
    assert pacer.overruns == 0


def test_realtime_pacer_resyncs_instead_of_bursting_after_a_stall():
    pacer = RealTimePacer(period=0.1, max_lag_steps=3)
    pacer.stepped(0.0)
    pacer.stepped(5.0)  # stalled for 5 s
    assert pacer.overruns == 1
    assert pacer.delay(5.0) == pytest.approx(0.1)


def test_lockstep_gate_waits_for_an_answer_to_the_newest_observation():
    gate = LockstepGate(timeout=1.0)
    gate.observed(stamp=2.0, wall_now=100.0)
    assert not gate.ready(100.5)
    gate.command(stamp=1.9)  # answers an older observation
    assert not gate.ready(100.5)
    gate.command(stamp=2.0)
    assert gate.ready(100.5)
    assert gate.timeouts == 0


def test_lockstep_gate_steps_after_the_timeout_and_counts_it():
    gate = LockstepGate(timeout=0.5)
    gate.observed(stamp=1.0, wall_now=10.0)
    assert not gate.ready(10.4)
    assert gate.ready(10.5)
    assert gate.timeouts == 1


def test_lockstep_gate_without_timeout_waits_forever():
    gate = LockstepGate(timeout=0.0)
    gate.observed(stamp=1.0, wall_now=10.0)
    assert not gate.ready(1e9)
    gate.command(stamp=0.0)  # an unstamped command answers whatever is newest
    assert gate.ready(1e9)
    with pytest.raises(InvalidConfigError, match="lockstep_timeout"):
        LockstepGate(timeout=-1.0)


def test_real_time_factor():
    meter = RealTimeFactorMeter(window=3)
    assert meter.value == 0.0
    for i in range(5):
        meter.add(sim_time=i * 0.1, wall_time=i * 0.05)
    assert meter.value == pytest.approx(2.0)
    with pytest.raises(InvalidConfigError):
        RealTimePacer(period=0.0)


def test_lockstep_gate_keeps_an_answer_that_arrived_before_the_observation_was_recorded():
    # Issue 18: the bridge recorded an observation after publishing it; a controller that answered first was
    # forgotten and the lockstep waited forever (an evaluation stopped with "no complete observation").
    gate = LockstepGate(timeout=0.0)
    gate.observed(stamp=1.0, wall_now=10.0)
    gate.command(stamp=1.0)
    assert gate.ready(10.0)
    gate.command(stamp=1.1)  # the answer to the next observation, handled before the bridge recorded it
    gate.observed(stamp=1.1, wall_now=10.1)
    assert gate.ready(10.1)
    gate.observed(stamp=1.2, wall_now=10.2)  # the answer to 1.1 does not answer 1.2
    assert not gate.ready(1e9)
    gate.command(stamp=1.2)
    assert gate.ready(1e9)
