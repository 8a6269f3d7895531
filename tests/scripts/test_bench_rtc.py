"""bench/bench_rtc.py's closed loop: the SO-101 task hands the executor radians, and the seam/jerk metrics."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_rtc

    return bench_rtc


class HoldPolicy:
    """Every chunk holds the observed joints (in the policy's units: degrees, gripper 0..100)."""

    horizon = 32

    def __init__(self) -> None:
        self.prefixes: list[Any] = []

    def predict_chunk(self, observation: dict[str, np.ndarray], prefix: Any = None) -> np.ndarray:
        self.prefixes.append(prefix)
        return np.tile(np.asarray(observation["observation.state"], dtype=np.float64), (self.horizon, 1))


def test_the_so101_task_turns_the_policys_units_into_joint_commands(bench: ModuleType) -> None:
    """A policy that holds the observed pose (LeRobot units) keeps the sim arm where it is: the chunk reached the
    executor in radians, and rtc got the previous chunk back. The arm sags under gravity (0.03 rad in 30 ticks
    commanding its resting pose directly, more as each chunk holds the sagged pose); degrees or the gripper's
    0..100 sent as radians would swing a joint by more than a radian."""
    import rtc_so101

    task = rtc_so101.So101Task()
    task.episode_s = 1.0
    try:
        for mode in (bench.BlendMode.REPLACE, bench.BlendMode.RTC):
            policy = HoldPolicy()
            start = task.reset(1000)
            metrics, inference = bench.run_episode(policy, task, mode, 0.2, seed=1000)  # type: ignore[arg-type]
            moved = np.abs(np.asarray(task.adapter.joint_positions()) - start).max()
            assert moved < 0.15, f"{mode}: the arm moved {moved:.3f} rad under a policy holding its pose"
            assert metrics["failure"] == "timeout" and not metrics["success"]
            assert metrics["ticks"] == 30 and len(inference) >= 2
            handed = [p for p in policy.prefixes if p is not None]
            if mode is bench.BlendMode.RTC:
                assert handed and handed[0].inference_delay == 7  # ceil((0.2 + 0.03) s * 30 Hz)
            else:
                assert not handed
    finally:
        task.close()


def test_the_seam_is_the_largest_step_at_a_chunk_switch_and_start_up_is_left_out(bench: ModuleType) -> None:
    commands = np.zeros((60, 2))
    commands[:, 0] = 0.01 * np.arange(60)  # a ramp: every in-chunk step is 0.01
    commands[7:] += [0.5, 0.0]  # the first chunk's arrival (start-up): not a seam
    commands[31:] += [0.0, 0.1]  # a jump at the second chunk's arrival (tick 30)
    metrics = bench._metrics(commands, [6, 30])
    assert metrics["seam_step"] == pytest.approx(np.hypot(0.01, 0.1))
    assert metrics["median_inner_step"] == pytest.approx(0.01)
    assert metrics["jerk_rms"] > 0.0
    smooth = bench._metrics(commands[:30], [6])
    assert smooth["seam_step"] == 0.0 and smooth["jerk_rms"] == pytest.approx(0.0, abs=1e-6)
