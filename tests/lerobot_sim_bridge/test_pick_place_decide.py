"""The SO-101 expert's phase rules as a pure function: each observation maps to one phase, gripper and goal."""

import numpy as np
import pytest

from lerobot_sim_bridge.experts.so101_pick_place import (
    CAREFUL_STEP,
    FINAL_STEP,
    FREE_STEP,
    GRASP_HEIGHT,
    GRASP_Y_OFFSET,
    GRIPPER_CLOSED,
    GRIPPER_OPEN,
    HOVER_HEIGHT,
    LIFT_HEIGHT,
    Phase,
    decide,
)

TABLE = 0.02  # the goal's height: where a block's centre rests
BLOCK = np.array([0.25, -0.05, TABLE - 0.0001])
GOAL = np.array([0.20, 0.08, TABLE])
OPEN, HELD, EMPTY = 1.74, 0.40, -0.17  # measured gripper angles: open, closed on the block, closed on nothing


def above_block(height: float, dx: float = 0.0) -> np.ndarray:
    """The grasp point `height` above the table where the expert aims it (dx off in x)."""
    return np.array([BLOCK[0] + dx, BLOCK[1] + GRASP_Y_OFFSET, TABLE + height])


def test_start_pose_with_the_jaw_shut_opens_it_first() -> None:
    decision = decide(np.array([0.39, 0.0, 0.25]), BLOCK, GOAL, gripper=0.0)
    assert decision.phase is Phase.REOPEN and decision.gripper == GRIPPER_OPEN


def test_open_and_away_goes_above_the_block_at_full_speed() -> None:
    decision = decide(np.array([0.39, 0.0, 0.25]), BLOCK, GOAL, OPEN)
    assert decision.phase is Phase.HOVER and decision.step == FREE_STEP
    np.testing.assert_allclose(decision.goal_point, above_block(HOVER_HEIGHT))


def test_low_and_away_rises_before_moving_across() -> None:
    grasp = above_block(0.03, dx=0.05)
    decision = decide(grasp, BLOCK, GOAL, OPEN)
    assert decision.phase is Phase.RISE
    np.testing.assert_allclose(decision.goal_point, [grasp[0], grasp[1], TABLE + HOVER_HEIGHT])


def test_above_the_block_descends_slowly_and_slower_at_the_end() -> None:
    high = decide(above_block(HOVER_HEIGHT, dx=0.003), BLOCK, GOAL, OPEN)
    assert high.phase is Phase.DESCEND and high.step == CAREFUL_STEP and high.gripper == GRIPPER_OPEN
    np.testing.assert_allclose(high.goal_point, above_block(GRASP_HEIGHT))
    low = decide(above_block(GRASP_HEIGHT + 0.015), BLOCK, GOAL, OPEN)
    assert low.phase is Phase.DESCEND and low.step == FINAL_STEP
    # Not centred enough to start going down from hover height: centre first.
    assert decide(above_block(HOVER_HEIGHT, dx=0.006), BLOCK, GOAL, OPEN).phase is Phase.HOVER


def test_at_grasp_height_closes_and_stays_closing_while_the_jaw_moves() -> None:
    for gripper in (OPEN, 1.0, 0.6):
        decision = decide(above_block(GRASP_HEIGHT + 0.005), BLOCK, GOAL, gripper)
        assert decision.phase is Phase.CLOSE and decision.gripper == GRIPPER_CLOSED


def test_a_held_block_is_lifted_carried_over_the_goal_and_lowered() -> None:
    lift = decide(above_block(GRASP_HEIGHT), BLOCK, GOAL, HELD)
    assert lift.phase is Phase.LIFT and lift.gripper == GRIPPER_CLOSED
    np.testing.assert_allclose(lift.goal_point, above_block(LIFT_HEIGHT))

    carried = BLOCK + np.array([0.0, 0.0, LIFT_HEIGHT - GRASP_HEIGHT])
    grasp = carried + np.array([0.002, 0.001, GRASP_HEIGHT])  # the block sits a little off-centre in the jaws
    traverse = decide(grasp, carried, GOAL, HELD)
    assert traverse.phase is Phase.TRAVERSE
    # The block, not the grasp point, is steered over the goal.
    np.testing.assert_allclose(traverse.goal_point[:2], grasp[:2] + GOAL[:2] - carried[:2])

    near = np.array([GOAL[0] + 0.008, GOAL[1], carried[2]])
    lower = decide(near + np.array([0.0, 0.0, GRASP_HEIGHT]), near, GOAL, HELD)
    assert lower.phase is Phase.LOWER and lower.step == CAREFUL_STEP
    assert lower.goal_point[2] < near[2] + GRASP_HEIGHT


@pytest.mark.parametrize(("gripper", "phase"), [(HELD, Phase.OPEN), (1.0, Phase.OPEN), (OPEN, Phase.RETREAT)])
def test_a_block_put_down_on_the_goal_is_released_then_left(gripper: float, phase: Phase) -> None:
    placed = np.array([GOAL[0] + 0.004, GOAL[1], TABLE + 0.001])
    decision = decide(placed + np.array([0.0, 0.0, GRASP_HEIGHT]), placed, GOAL, gripper)
    assert decision.phase is phase and decision.gripper == GRIPPER_OPEN


def test_a_missed_grasp_reopens_and_tries_again() -> None:
    decision = decide(above_block(GRASP_HEIGHT + 0.02, dx=0.02), BLOCK, GOAL, EMPTY)
    assert decision.phase is Phase.REOPEN and decision.gripper == GRIPPER_OPEN
    assert decision.goal_point[2] >= TABLE + GRASP_HEIGHT
