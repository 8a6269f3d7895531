"""What a scripted expert is, and how one is chosen for an environment id."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from lerobot_sim_bridge.adapters.base import FloatArray, ObjectPose, StepOutcome
from lerobot_sim_bridge.errors import UnknownEnvironmentError

if TYPE_CHECKING:
    from lerobot_sim_bridge.adapters.base import SimAdapter


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


def make_expert(env_id: str, hold_ticks: int = 1) -> ScriptedExpert:
    """The scripted expert of a built-in environment (`hold_ticks`: SO-101 observations each target is held)."""
    if env_id in ("so101_pick_place", "lerobot_env_so101/SO101PickPlace-v0"):
        from lerobot_sim_bridge.experts.so101_pick_place import PickPlaceExpert

        return PickPlaceExpert(hold_ticks=hold_ticks)
    if env_id in ("pusht", "gym_pusht/PushT-v0"):
        from lerobot_sim_bridge.experts.pusht import PushTExpert

        return PushTExpert()
    raise UnknownEnvironmentError(
        f"no scripted expert for environment {env_id!r}; experts exist for so101_pick_place and pusht"
    )


def expert_steps(
    adapter: SimAdapter, expert: ScriptedExpert, seed: int, max_steps: int
) -> Iterator[tuple[FloatArray, dict[str, ObjectPose], FloatArray, StepOutcome]]:
    """One expert episode on `seed` in this process (the bridge's joint-level loop), step by step: the joint
    positions and object poses the expert acted on, its targets, and the step's outcome. Ends on success,
    termination or after `max_steps`."""
    adapter.reset(seed)
    expert.reset()
    for _ in range(max_steps):
        joint_positions = adapter.joint_positions()
        objects = {pose.name: pose for pose in adapter.object_poses()}
        targets = expert.act(joint_positions, objects)
        outcome = adapter.step(targets)
        yield joint_positions, objects, targets, outcome
        if outcome.success or outcome.terminated:
            return


def run_expert_episodes(env_id: str, seeds: Sequence[int], fps: float, max_steps: int) -> dict[str, Any]:
    """The expert on `seeds` in this process (the bridge's joint-level loop, no ROS, no cameras): success per seed."""
    from lerobot_sim_bridge.adapters import SimConfig, make_adapter

    adapter = make_adapter(env_id, SimConfig(fps=fps))
    expert = make_expert(env_id)
    results = []
    try:
        for seed in seeds:
            best_reward, steps, success = 0.0, 0, False
            for _, _, _, outcome in expert_steps(adapter, expert, seed, max_steps):
                best_reward = max(best_reward, outcome.reward)
                success = success or outcome.success
                steps += 1
            results.append({"seed": seed, "success": success, "steps": steps, "max_reward": round(best_reward, 4)})
    finally:
        adapter.close()
    successes = sum(1 for r in results if r["success"])
    return {
        "episodes": len(results),
        "successes": successes,
        "success_rate": successes / len(results) if results else 0.0,
        "mean_max_reward": sum(r["max_reward"] for r in results) / len(results) if results else 0.0,
        "mean_steps": sum(r["steps"] for r in results) / len(results) if results else 0.0,
        "episodes_detail": results,
    }
