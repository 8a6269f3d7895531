"""The demo deploys its policy with the speed its demonstrations have (issue #19 item 5), without ROS.

The action executor moves each joint's target at most `max_velocity` x dt per tick; the sim's robot config
(config/robots/so101_sim.yaml, what `launch/sim_policy.launch.yaml` gives the executor) had the real arm
driver's 3 rad/s. The scripted expert that records the demonstrations closes the jaw from open to closed in
one 33 ms step, so a policy imitating it was executed 20 times slower than it learnt on the gripper: the jaw
was still open when the next chunk was computed, the policy re-opened it and hovered over the block until the
time limit (0/14 episodes through ROS; in-process with 3 rad/s on the gripper alone 2/8, unlimited 7/8).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from lerobot_sim_bridge.adapters import SimConfig, make_adapter
from lerobot_sim_bridge.experts.base import expert_steps, make_expert

REPO = Path(__file__).resolve().parents[2]
FPS = 30.0


def demonstration_speeds(seeds: range) -> np.ndarray:
    """Per joint, the largest change of the scripted expert's target between two steps (rad per step)."""
    adapter, expert = make_adapter("so101_pick_place", SimConfig(fps=FPS)), make_expert("so101_pick_place")
    largest = np.zeros(6)
    try:
        for seed in seeds:
            targets = np.array([step[2] for step in expert_steps(adapter, expert, seed, 900)])
            largest = np.maximum(largest, np.abs(np.diff(targets, axis=0)).max(axis=0))
    finally:
        adapter.close()
    return largest


def test_the_sim_executor_can_move_as_fast_as_the_demonstrations() -> None:
    config = yaml.safe_load((REPO / "config" / "robots" / "so101_sim.yaml").read_text())
    params = config["/follower/action_executor"]["ros__parameters"]
    per_step = float(params["max_velocity"]) / FPS
    speeds = demonstration_speeds(range(3))
    assert speeds[5] > 1.5, "the expert closes the jaw in one step (open 1.745 -> closed -0.175 rad)"
    slow = [name for name, speed in zip(params["joint_names"], speeds, strict=True) if speed > per_step]
    assert not slow, (
        f"max_velocity {params['max_velocity']} rad/s ({per_step:.2f} rad per step) is slower than the demonstrations "
        f"on {slow}: {dict(zip(params['joint_names'], speeds.round(3), strict=True))}"
    )
