"""Leader arm -> follower arm targets, as LeRobot's teleoperation does it.

LeRobot sends the leader's normalised reading as the follower's action: body joints in degrees (the same
angle on both arms), the gripper as 0..100 of each arm's own calibrated range. In this project's radians
(zero = middle of the calibrated range) body joints pass through unchanged and the gripper is rescaled
from the leader's range to the follower's. `clip_relative` is LeRobot's `max_relative_target`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.spec import ArmSpec
from lerobot_drivers.motors.calibration import (
    MotorCalibration,
    NormMode,
    lerobot_to_radians,
    radians_to_lerobot,
    validate_calibration,
)
from lerobot_drivers.teleop.errors import IncompatibleArmsError, TeleopError

FloatArray = npt.NDArray[np.float64]

# leader robot type -> follower robot types it can drive (same kinematics and joint names)
FOLLOWERS_OF: dict[str, tuple[str, ...]] = {
    "so100_leader": ("so100_follower", "so101_follower"),
    "so101_leader": ("so101_follower", "so100_follower"),
    "koch_leader": ("koch_follower",),
}


def check_pair(leader_type: str, follower_type: str) -> tuple[ArmSpec, ArmSpec]:
    """The two arms' specs; IncompatibleArmsError when this leader cannot drive this follower."""
    try:
        leader, follower = get_arm(leader_type), get_arm(follower_type)
    except ValueError as err:
        raise TeleopError(str(err)) from None
    if leader.role != "leader":
        raise IncompatibleArmsError(f"{leader_type} is not a leader arm; use one of {', '.join(FOLLOWERS_OF)}")
    if follower.role != "follower":
        raise IncompatibleArmsError(f"{follower_type} is not a follower arm")
    allowed = FOLLOWERS_OF.get(leader_type, ())
    if follower_type not in allowed:
        leaders = sorted(k for k, v in FOLLOWERS_OF.items() if follower_type in v)
        raise IncompatibleArmsError(
            f"a {leader_type} cannot drive a {follower_type} (other kinematics and motors); "
            f"a {follower_type} is driven by {' or '.join(leaders) or 'no leader arm'}"
        )
    return leader, follower


@dataclass(frozen=True)
class _JointMap:
    mode: NormMode
    leader_cal: MotorCalibration
    follower_cal: MotorCalibration
    leader_resolution: int
    follower_resolution: int
    leader_drive_mode: bool
    follower_drive_mode: bool


class LeaderFollowerMap:
    """Maps leader joint positions (rad) to follower targets (rad), joint by joint, by name."""

    def __init__(
        self,
        leader: ArmSpec,
        follower: ArmSpec,
        leader_calibration: Mapping[str, MotorCalibration],
        follower_calibration: Mapping[str, MotorCalibration],
    ) -> None:
        check_pair(leader.robot_type, follower.robot_type)
        validate_calibration(leader_calibration, leader.expected_calibration(), leader.robot_type, "leader calibration")
        validate_calibration(
            follower_calibration, follower.expected_calibration(), follower.robot_type, "follower calibration"
        )
        self.leader = leader
        self.follower = follower
        self.joint_names = follower.joint_names
        self._maps = {
            name: _JointMap(
                follower.joint(name).norm_mode,
                leader_calibration[name],
                follower_calibration[name],
                leader.model(name).resolution,
                follower.model(name).resolution,
                leader.apply_drive_mode,
                follower.apply_drive_mode,
            )
            for name in self.joint_names
        }

    def map(self, names: Sequence[str], positions: Sequence[float]) -> FloatArray:
        """Follower targets in `joint_names` order for a leader reading (`names`, `positions`).

        Raises TeleopError when the reading lacks a joint, has extra ones or holds NaN/inf.
        """
        if len(names) != len(positions):
            raise TeleopError(f"leader joint_states has {len(names)} names but {len(positions)} positions")
        reading = dict(zip(names, positions, strict=True))
        missing = [n for n in self.joint_names if n not in reading]
        extra = [n for n in reading if n not in self._maps]
        if missing or extra:
            raise TeleopError(
                f"leader joints {sorted(reading)} do not match the {self.follower.robot_type}'s "
                f"{list(self.joint_names)} (missing {missing}, unexpected {extra}): is the leader another robot type?"
            )
        out = np.empty(len(self.joint_names))
        for i, name in enumerate(self.joint_names):
            value = float(reading[name])
            if not np.isfinite(value):
                raise TeleopError(f"leader joint {name} reads {value}")
            out[i] = self._map_joint(self._maps[name], value)
        return out

    @staticmethod
    def _map_joint(m: _JointMap, radians: float) -> float:
        if m.mode is NormMode.DEGREES:
            return radians
        value = radians_to_lerobot(radians, m.leader_cal, m.mode, m.leader_resolution, m.leader_drive_mode)
        return lerobot_to_radians(value, m.follower_cal, m.mode, m.follower_resolution, m.follower_drive_mode)


def clip_relative(goal: FloatArray, present: FloatArray, max_relative_target: float) -> tuple[FloatArray, bool]:
    """`goal` kept within `max_relative_target` of `present` per joint (LeRobot's `ensure_safe_goal_position`);
    returns the goal and whether anything was clipped. 0 or less: no clipping."""
    if max_relative_target <= 0:
        return goal, False
    clipped = np.clip(goal, present - max_relative_target, present + max_relative_target)
    return clipped, bool(np.any(clipped != goal))
