"""A state-feedback pick-and-place expert for the simulated SO-101, acting like a leader arm: joint targets.

Its action is a function of what a policy observes (the six joint positions and the block and goal
positions), so behaviour cloning can imitate it. The `lerobot-env-so101` package's own `PickPlaceController`
is not: it integrates a Cartesian target across calls and counts ticks while the jaw closes; ACT trained on
its demonstrations reproduced it step by step (1-2 degrees) but drifted off it closed-loop and scored 0/10.

Each observation is classified into a phase by `decide()` (a pure function, first matching rule wins):

- PLACED: the block rests on the table within `PLACED_DISTANCE` of the goal -> open, then RETREAT upwards.
- CARRY: the block is between the jaws and the gripper has closed on it -> LIFT straight up, TRAVERSE at lift
  height (steering the block, not the grasp point, over the goal), LOWER it onto the goal.
- CLOSE: the grasp point is at the block (or as low as the arm gets there) -> close the jaw.
- REOPEN: the gripper is not open (the start pose, or a missed grasp) -> open while rising.
- DESCEND: the grasp point is above the block -> go down slowly.
- RISE: low and away from the block -> straight up first, so the jaws do not sweep the block.
- HOVER: otherwise -> above the block.

The phase's goal point becomes a Cartesian target at most one step (`FREE_STEP`, `CAREFUL_STEP`) from the
measured grasp point, the package env's top-down IK (seeded at the measured joints) turns it into joint
angles, and the gravity torque at those angles divided by the servo gain is added, so the position servos
settle on the target instead of sagging below it. Measured (in-process, 30 Hz): 200/200 over seeds 0..199,
about 2.5 s per episode.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lerobot_sim_bridge.adapters.base import FloatArray, ObjectPose
from lerobot_sim_bridge.errors import InvalidConfigError

JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")

# Gripper joint targets (rad): the actuator's range ends.
GRIPPER_OPEN = 1.74533
GRIPPER_CLOSED = -0.17453
# Measured gripper positions (rad): above OPENED the jaw is open; closed on the block it stops near 0.4, on
# nothing near -0.17. CLOSING_FROM separates "opening/closing in flight" from "open".
GRIPPER_OPENED = 1.5
GRIPPER_CLOSING_FROM = 1.2
HOLDING = (0.1, 0.45)

# Heights above the table (m): the grasp point hovers, grasps and carries at these.
HOVER_HEIGHT = 0.07
GRASP_HEIGHT = 0.015
LIFT_HEIGHT = GRASP_HEIGHT + 0.06
RELEASE_CLEARANCE = 0.002
# The jaws close along world y (the IK keeps them there). The grasp point is not the middle of the *open* jaws:
# aimed at the block centre, 0.5 mm more to +y and the fixed jaw lands on the block. Measured over seeds 0..19
# with the aim shifted along y: 20/20 from -8 mm to 0, 10/20 at -10 mm and at +1 mm, 0/20 from +2 mm. Aiming
# at the middle of that range leaves a policy +-4 mm.
GRASP_Y_OFFSET = -0.0045
# Largest step of the Cartesian target from the measured grasp point per observation (m).
FREE_STEP = 0.03
CAREFUL_STEP = 0.01
FINAL_APPROACH = 0.02  # the last this much of the descent (m) ...
FINAL_STEP = 0.004  # ... goes slowly, so the jaw closes where the arm stopped, not on the way down
# Tolerances (m).
DESCEND_XY = 0.0045  # start descending when this close above the block ...
DESCEND_XY_LOW = 0.008  # ... and keep descending while this close once below hover height
CLOSE_XY = 0.006
# Close when the grasp point is this close above its grasp height: where the jaws cannot stay quite vertical
# (far out, or turned) the arm stops up to 11 mm short of it, and the pads still pinch the block.
CLOSE_Z = 0.012
PLACED_DISTANCE = 0.01
PLACED_HEIGHT = RELEASE_CLEARANCE + 0.0005  # a block lowered to the release clearance counts as put down
LOWER_DISTANCE = 0.015  # a carried block this close to the goal (horizontally) is lowered
RESTING = 0.004  # block centre at most this far above its resting height counts as on the table
JAWS_XY = 0.012  # block centre this close (horizontally) under the grasp point counts as between the jaws


class Phase(enum.Enum):
    HOVER = enum.auto()
    RISE = enum.auto()
    DESCEND = enum.auto()
    CLOSE = enum.auto()
    REOPEN = enum.auto()
    LIFT = enum.auto()
    TRAVERSE = enum.auto()
    LOWER = enum.auto()
    OPEN = enum.auto()
    RETREAT = enum.auto()


@dataclass(frozen=True)
class Decision:
    """What to do for one observation: the phase, the gripper joint target and where the grasp point goes."""

    phase: Phase
    gripper: float
    goal_point: FloatArray
    # Largest move of the Cartesian target from the measured grasp point.
    step: float = FREE_STEP


def decide(grasp: FloatArray, block: FloatArray, goal: FloatArray, gripper: float) -> Decision:
    """The phase for grasp-point, block-centre and goal positions (world, m) and the measured gripper angle.

    The goal's height is the block's resting height (the table reference).
    """
    table = float(goal[2])
    hover_z, lift_z = table + HOVER_HEIGHT, table + LIFT_HEIGHT
    grasp_point = np.array([block[0], block[1] + GRASP_Y_OFFSET, table + GRASP_HEIGHT])
    to_goal = float(np.linalg.norm(block[:2] - goal[:2]))
    resting = block[2] < table + RESTING
    above = grasp - block
    in_jaws = float(np.linalg.norm(above[:2])) < JAWS_XY and -0.005 < above[2] < 0.03
    off_block = float(np.linalg.norm(grasp[:2] - grasp_point[:2]))
    high = grasp[2] - grasp_point[2]

    def up(z: float) -> FloatArray:
        return np.array([grasp[0], grasp[1], z])

    if to_goal < PLACED_DISTANCE and block[2] < table + PLACED_HEIGHT:
        if gripper < GRIPPER_OPENED:
            return Decision(Phase.OPEN, GRIPPER_OPEN, grasp.copy(), CAREFUL_STEP)
        return Decision(Phase.RETREAT, GRIPPER_OPEN, up(hover_z))
    if in_jaws and HOLDING[0] < gripper < HOLDING[1]:
        if to_goal < LOWER_DISTANCE:
            target = grasp + np.array([goal[0] - block[0], goal[1] - block[1], 0.0])
            target[2] = table + GRASP_HEIGHT + RELEASE_CLEARANCE + (above[2] - GRASP_HEIGHT)
            return Decision(Phase.LOWER, GRIPPER_CLOSED, target, CAREFUL_STEP)
        if grasp[2] < lift_z - 0.01:
            return Decision(Phase.LIFT, GRIPPER_CLOSED, up(lift_z), CAREFUL_STEP)
        return Decision(Phase.TRAVERSE, GRIPPER_CLOSED, np.array([*(grasp[:2] + goal[:2] - block[:2]), lift_z]))
    if off_block < CLOSE_XY and resting and high < CLOSE_Z:
        return Decision(Phase.CLOSE, GRIPPER_CLOSED, grasp_point, CAREFUL_STEP)
    if gripper < GRIPPER_CLOSING_FROM:
        return Decision(Phase.REOPEN, GRIPPER_OPEN, up(max(float(grasp[2]), table + GRASP_HEIGHT + 0.01)))
    if off_block < (DESCEND_XY_LOW if grasp[2] < hover_z - 0.005 else DESCEND_XY):
        return Decision(Phase.DESCEND, GRIPPER_OPEN, grasp_point, CAREFUL_STEP if high > FINAL_APPROACH else FINAL_STEP)
    if grasp[2] < hover_z - 0.015 and off_block > 0.02:
        return Decision(Phase.RISE, GRIPPER_OPEN, up(hover_z))
    return Decision(Phase.HOVER, GRIPPER_OPEN, np.array([grasp_point[0], grasp_point[1], hover_z]))


class PickPlaceExpert:
    """Joint-target expert for `so101_pick_place`; call `reset()` at every episode start."""

    def __init__(self, hold_ticks: int = 1) -> None:
        if hold_ticks < 1:
            raise InvalidConfigError(f"hold_ticks must be >= 1, got {hold_ticks}")
        import mujoco
        from lerobot_env_so101.pick_place_env import SO101PickPlaceGymEnv

        self._mujoco = mujoco
        self.hold_ticks = hold_ticks
        # A kinematics-only copy of the package env: its IK and grasp point, no physics steps.
        self._shadow: Any = SO101PickPlaceGymEnv()
        self._shadow._n_substeps = 0
        model = self._shadow.model
        self._qpos_adr = np.array([model.joint(name).qposadr[0] for name in JOINT_NAMES])
        self._dof_adr = np.array([model.joint(name).dofadr[0] for name in JOINT_NAMES[:5]])
        self._ctrl_ids = np.array([model.actuator(name).id for name in JOINT_NAMES[:5]])
        self._kp = np.array(model.actuator_gainprm[self._ctrl_ids, 0], dtype=np.float64)
        self._tick = 0
        self._targets: FloatArray | None = None
        self._phase: Phase | None = None

    @property
    def object_names(self) -> tuple[str, ...]:
        """Task objects in `sim/object_poses` order."""
        return ("block", "goal")

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Order of the joint positions `act` takes and of the targets it returns."""
        return JOINT_NAMES

    @property
    def phase(self) -> str:
        """The phase of the last observation (HOVER, DESCEND, CLOSE, ...; NONE before the first)."""
        return self._phase.name if self._phase is not None else "NONE"

    def reset(self) -> None:
        """Start a new episode (nothing carries over but the hold counter)."""
        self._tick = 0
        self._targets = None
        self._phase = None

    def grasp_point(self, joint_positions: FloatArray) -> FloatArray:
        """World position of the point between the jaws for these joint positions."""
        self._shadow.data.qpos[self._qpos_adr] = joint_positions
        self._shadow.data.qvel[:] = 0.0
        self._mujoco.mj_forward(self._shadow.model, self._shadow.data)
        return np.array(self._shadow.ik_point_pos, dtype=np.float64)

    def act(self, joint_positions: FloatArray, objects: Mapping[str, ObjectPose]) -> FloatArray:
        """The joint targets for this observation (recomputed every `hold_ticks` calls, else held).

        `objects` must hold the `block` and `goal` poses (the bridge's `sim/object_poses`).
        """
        missing = {"block", "goal"} - set(objects)
        if missing:
            raise InvalidConfigError(
                f"pick-and-place expert needs object poses {sorted(missing)}; got {sorted(objects)}"
            )
        q = np.asarray(joint_positions, dtype=np.float64)
        if q.shape != (len(JOINT_NAMES),) or not np.all(np.isfinite(q)):
            raise InvalidConfigError(f"joint positions must be {len(JOINT_NAMES)} finite values, got {q}")
        if self._targets is None or self._tick % self.hold_ticks == 0:
            grasp = self.grasp_point(q)
            decision = decide(
                grasp,
                np.asarray(objects["block"].position, dtype=np.float64),
                np.asarray(objects["goal"].position, dtype=np.float64),
                float(q[5]),
            )
            self._phase = decision.phase
            step = decision.step
            target = grasp + np.clip(decision.goal_point - grasp, -step, step)
            self._targets = np.append(self._arm_targets(target), decision.gripper)
        self._tick += 1
        return self._targets.copy()

    def _arm_targets(self, grasp_target: FloatArray) -> FloatArray:
        """Gravity-compensated arm joint targets that put the grasp point at `grasp_target` (shadow at q)."""
        shadow = self._shadow
        # A zero position action after a zero one keeps `_target_ee_pos` as set: the IK solves for it directly.
        shadow._target_ee_pos = grasp_target
        shadow._last_action_was_zero = True
        shadow.apply_action(np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32))
        angles = np.array(shadow.data.ctrl[self._ctrl_ids], dtype=np.float64)
        shadow.data.qpos[self._qpos_adr[:5]] = angles
        self._mujoco.mj_forward(shadow.model, shadow.data)
        gravity = np.array(shadow.data.qfrc_bias[self._dof_adr], dtype=np.float64)
        return angles + gravity / self._kp
