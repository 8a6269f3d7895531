"""The `lerobot-env-so101` scripted pick-and-place controller, as a leader arm would send it: joint targets.

The package's `PickPlaceController` decides Cartesian moves at 10 Hz and the env turns them into joint
targets with its IK. Here a kinematics-only copy of the package env (no physics steps) does that
conversion from the measured joint positions, so the expert's output is six joint position targets,
recomputed every `hold_ticks` observations (3 at 30 Hz = the controller's 10 Hz) and held in between.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lerobot_sim_bridge.adapters.base import FloatArray, ObjectPose
from lerobot_sim_bridge.errors import InvalidConfigError

JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


class PickPlaceExpert:
    """Joint-target expert for `so101_pick_place`; call `reset()` at every episode start."""

    def __init__(self, hold_ticks: int = 3) -> None:
        if hold_ticks < 1:
            raise InvalidConfigError(f"hold_ticks must be >= 1, got {hold_ticks}")
        import mujoco
        from lerobot_env_so101.pick_place_env import SO101PickPlaceGymEnv
        from lerobot_env_so101.policy import DEFAULT_ACTION_SCALE
        from lerobot_env_so101.scripted import PickPlaceController

        self._mujoco = mujoco
        self.hold_ticks = hold_ticks
        self._shadow: Any = SO101PickPlaceGymEnv(action_scale=DEFAULT_ACTION_SCALE)
        # apply_action() then only updates the IK target and writes ctrl: no physics step.
        self._shadow._n_substeps = 0
        model = self._shadow.model
        self._qpos_adr = np.array([model.joint(name).qposadr[0] for name in JOINT_NAMES])
        self._ctrl_ids = np.array([model.actuator(name).id for name in JOINT_NAMES])
        self._controller = PickPlaceController(action_scale=DEFAULT_ACTION_SCALE)
        self._tick = 0
        self._targets: FloatArray | None = None

    @property
    def object_names(self) -> tuple[str, ...]:
        """Task objects in `sim/object_poses` order."""
        return ("block", "goal")

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Order of the joint positions `act` takes and of the targets it returns."""
        return JOINT_NAMES

    @property
    def done(self) -> bool:
        """Whether the controller has finished its phases (released the block and retreated)."""
        return bool(self._controller.done)

    @property
    def phase(self) -> str:
        """The controller's current phase name (HOVER, DESCEND, CLOSE, ...)."""
        return str(self._controller.phase.name)

    def reset(self) -> None:
        """Start a new episode: first phase, no held target."""
        self._controller.reset()
        self._tick = 0
        self._targets = None

    def _set_measured(self, joint_positions: FloatArray) -> None:
        self._shadow.data.qpos[self._qpos_adr] = joint_positions
        self._mujoco.mj_forward(self._shadow.model, self._shadow.data)

    def act(self, joint_positions: FloatArray, objects: Mapping[str, ObjectPose]) -> FloatArray:
        """The joint targets for this observation (recomputed every `hold_ticks` calls, else held).

        `objects` must hold the `block` and `goal` poses (the bridge's `sim/object_poses`).
        """
        missing = {"block", "goal"} - set(objects)
        if missing:
            raise InvalidConfigError(
                f"pick-and-place expert needs object poses {sorted(missing)}; got {sorted(objects)}"
            )
        block_position = np.asarray(objects["block"].position, dtype=np.float64)
        goal_position = np.asarray(objects["goal"].position, dtype=np.float64)
        q = np.asarray(joint_positions, dtype=np.float64)
        if q.shape != (len(JOINT_NAMES),) or not np.all(np.isfinite(q)):
            raise InvalidConfigError(f"joint positions must be {len(JOINT_NAMES)} finite values, got {q}")
        if self._targets is None or self._tick % self.hold_ticks == 0:
            self._set_measured(q)
            if self._targets is None:
                # Like the env's reset_robot(): the Cartesian target starts where the grasp point is.
                self._shadow._target_ee_pos = self._shadow.ik_point_pos
                self._shadow._last_action_was_zero = False
            action = self._controller.act(self._shadow.ik_point_pos, block_position, goal_position)
            self._shadow.apply_action(action)
            self._targets = np.array(self._shadow.data.ctrl[self._ctrl_ids], dtype=np.float64)
        self._tick += 1
        return self._targets.copy()
