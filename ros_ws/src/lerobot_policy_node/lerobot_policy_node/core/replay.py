"""Episode replay as one timed plan for the action executor (pure: plain arrays, no rclpy).

`lerobot-ros replay` sends a recorded episode's actions (already converted to ROS units by the contract) to
the robot through the action executor, as one ActionChunk: step k is the target at `stamp + k / fps`. The
plan starts where the robot is (the measured joint positions) and moves linearly to the episode's first
action over `approach_s`, so the executor never starts with a jump; then the episode plays at its own fps.
After the last step the executor holds the last target (its starvation hold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import PolicyConfigError


@dataclass(frozen=True)
class ReplayPlan:
    """The targets (ROS units, joint order) of a replay, one row per step of `period_ns`."""

    joint_names: tuple[str, ...]
    period_ns: int
    targets: npt.NDArray[np.float64]  # (approach_steps + frames, joints)
    approach_steps: int

    @property
    def frames(self) -> int:
        """Steps that come from the episode."""
        return int(self.targets.shape[0]) - self.approach_steps

    @property
    def duration_ns(self) -> int:
        """Time from the plan's stamp to its last step."""
        return (int(self.targets.shape[0]) - 1) * self.period_ns

    def episode_start_ns(self, stamp_ns: int) -> int:
        """When the episode's first action is due, for a plan stamped `stamp_ns`."""
        return stamp_ns + self.approach_steps * self.period_ns

    def expected(self, stamp_ns: int, times_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The plan's targets at `times_ns` (linear between steps, held past the end), for a plan stamped `stamp_ns`."""
        steps = (np.asarray(times_ns, dtype=np.float64) - stamp_ns) / self.period_ns
        grid = np.arange(self.targets.shape[0], dtype=np.float64)
        return np.stack([np.interp(steps, grid, self.targets[:, j]) for j in range(self.targets.shape[1])], axis=1)


def replay_plan(
    joint_names: tuple[str, ...],
    actions: npt.NDArray[np.float64],
    fps: float,
    start: npt.NDArray[np.float64] | None,
    approach_s: float,
) -> ReplayPlan:
    """The plan for an episode's `actions` (frames x joints, ROS units) from the measured `start` position.

    Raises PolicyConfigError naming what is wrong (shape, NaN, fps, approach time).
    """
    actions = np.asarray(actions, dtype=np.float64)
    if actions.ndim != 2 or actions.shape[0] < 1 or actions.shape[1] != len(joint_names):
        raise PolicyConfigError(
            f"the episode's actions have shape {actions.shape}; expected (frames >= 1, {len(joint_names)} joints)"
        )
    bad = np.argwhere(~np.isfinite(actions))
    if bad.size:
        frame, joint = (int(v) for v in bad[0])
        raise PolicyConfigError(f"the episode's action {joint_names[joint]} is not finite at frame {frame}")
    if not (math.isfinite(fps) and fps > 0):
        raise PolicyConfigError(f"fps must be > 0 (got {fps})")
    if not (math.isfinite(approach_s) and approach_s >= 0):
        raise PolicyConfigError(f"approach time must be >= 0 s (got {approach_s})")
    period_ns = round(NS / fps)
    if start is None:
        return ReplayPlan(joint_names, period_ns, actions, 0)
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    if start.shape[0] != len(joint_names) or not np.all(np.isfinite(start)):
        raise PolicyConfigError(f"the measured start position {start.tolist()} is not {len(joint_names)} finite values")
    steps = max(1, math.ceil(approach_s * fps))
    fractions = np.arange(steps, dtype=np.float64)[:, None] / steps
    approach = start[None, :] + fractions * (actions[0] - start)[None, :]
    return ReplayPlan(joint_names, period_ns, np.concatenate([approach, actions]), steps)
