"""Servo faults injected while the driver's cycle moves the fake arm: no goal step above the velocity limit.

Quick counts here (the default run); `tests/reliability/test_servo_faults.py` runs >= 100 injections of each
kind on both families behind the `reliability` marker.
"""

from __future__ import annotations

import pytest

from lerobot_drivers.fake.campaign import FAULT_KINDS, run_campaign

QUICK = 20


@pytest.mark.parametrize("robot", ["so101_follower", "koch_follower"])
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_faults_while_moving_never_step_a_goal_above_the_velocity_limit(kind, robot):
    result = run_campaign(kind, QUICK, robot=robot, seed=7)
    assert result.injections == QUICK
    assert result.violations == 0 and result.out_of_range == 0, result.examples
    assert result.bad_injections == 0
    # The faults really happened, and the arm really moved at the limit (so a violation could show).
    assert result.faults_seen >= QUICK
    if kind in ("timeout", "checksum", "silent"):
        assert result.failed_cycles > 0
    assert result.goal_writes > 6 * result.cycles // 2
    assert result.max_step_ticks >= result.limit_ticks - 2


def test_the_audit_finds_a_catch_up_step_after_a_silent_bus():
    # What issue 18 saw: a controller that credits the whole gap lets the goal jump after the bus returns.
    result = run_campaign("silent", 10, seed=7, update_period=1.0)
    assert result.violations > 0 and result.bad_injections > 0
    assert result.max_step_ticks > 2 * result.limit_ticks


def test_an_unknown_fault_kind_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="timeout, checksum, silent, status"):
        run_campaign("gremlins", 1)
