"""The arms LeRobot supports, described as motor ids, models and joint names, plus the pure arm controller."""

from __future__ import annotations

from lerobot_drivers.arms.koch import KOCH_FOLLOWER, KOCH_LEADER
from lerobot_drivers.arms.so import SO100_FOLLOWER, SO100_LEADER, SO101_FOLLOWER, SO101_LEADER
from lerobot_drivers.arms.spec import ArmSpec

ARMS: dict[str, ArmSpec] = {
    spec.robot_type: spec
    for spec in (SO100_FOLLOWER, SO100_LEADER, SO101_FOLLOWER, SO101_LEADER, KOCH_FOLLOWER, KOCH_LEADER)
}


def get_arm(robot_type: str) -> ArmSpec:
    """The arm called `robot_type` (LeRobot's name, e.g. `so101_follower`); ValueError lists the known ones."""
    try:
        return ARMS[robot_type]
    except KeyError:
        raise ValueError(f"unknown robot type {robot_type!r}; known: {', '.join(sorted(ARMS))}") from None
