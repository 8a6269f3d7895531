"""Issue 18 #4: kill -9 at evenly spread steps of the writer's file protocol (create, staging, commit journal).

`LEROBOT_ROS_KILL_POINTS` sets how many points (default 30; `make reliability` runs 100 or more through
kill_points.sweep). Every state a kill leaves is valid or explained by validate, a re-run completes it with
every saved episode intact, and (reference venv) LeRobot's loader agrees with validate.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kill_points import REF_PYTHON, sweep

POINTS = int(os.environ.get("LEROBOT_ROS_KILL_POINTS", "30"))


def test_kill_at_writer_steps_loses_nothing_and_validate_explains_every_state(tmp_path: Path) -> None:
    result = sweep(tmp_path, points=POINTS)
    print(f"kill points over {result.steps_per_run} steps: {result.summary()}")
    assert result.failures == [], "\n".join(result.failures)
    assert result.counts["tried"] == POINTS and result.counts["rerun_ok"] == POINTS
    assert result.counts["valid after kill"] and result.counts["pending after kill"]  # both kinds were hit


@pytest.mark.reference
@pytest.mark.skipif(not REF_PYTHON.exists(), reason="the LeRobot reference venv (.venv-lerobot-ref) is absent")
def test_lerobot_loads_every_state_validate_passes_after_a_kill(tmp_path: Path) -> None:
    result = sweep(tmp_path, points=POINTS, reference=True)
    print(f"kill points over {result.steps_per_run} steps: {result.summary()}")
    assert result.failures == [], "\n".join(result.failures)
    assert result.counts["reference_checked"] >= POINTS
