"""Issue 18 #4: kill -9 at evenly spread steps of the writer's file protocol (create, staging, commit journal).

`LEROBOT_ROS_KILL_POINTS` sets how many points (default 30; `make reliability` runs 100 or more through
kill_points.sweep). Every state a kill leaves is valid or explained by validate, a re-run completes it with
every saved episode intact, and (reference venv) LeRobot's loader agrees with validate.
"""

from __future__ import annotations

import os

import pytest
from kill_points import REF_PYTHON, SweepResult, sweep

POINTS = int(os.environ.get("LEROBOT_ROS_KILL_POINTS", "30"))


@pytest.fixture(scope="module")
def kill_sweep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SweepResult:
    """One sweep for both tests: with the reference venv and the reference test selected, LeRobot's loader also
    checks the states (`sweep(reference=True)` does every check of a plain sweep and that one)."""
    reference = REF_PYTHON.exists() and any(
        item.module is request.module and item.get_closest_marker("reference") is not None
        for item in request.session.items
    )
    return sweep(tmp_path_factory.mktemp("kill_points"), points=POINTS, reference=reference)


def test_kill_at_writer_steps_loses_nothing_and_validate_explains_every_state(kill_sweep: SweepResult) -> None:
    result = kill_sweep
    print(f"kill points over {result.steps_per_run} steps: {result.summary()}")
    assert result.failures == [], "\n".join(result.failures)
    assert result.counts["tried"] == POINTS and result.counts["rerun_ok"] == POINTS
    assert result.counts["valid after kill"] and result.counts["pending after kill"]  # both kinds were hit


@pytest.mark.reference
@pytest.mark.skipif(not REF_PYTHON.exists(), reason="the LeRobot reference venv (.venv-lerobot-ref) is absent")
def test_lerobot_loads_every_state_validate_passes_after_a_kill(kill_sweep: SweepResult) -> None:
    result = kill_sweep
    print(f"kill points over {result.steps_per_run} steps: {result.summary()}")
    assert result.failures == [], "\n".join(result.failures)
    assert result.counts["reference_checked"] >= POINTS
