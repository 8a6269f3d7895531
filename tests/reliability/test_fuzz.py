"""Fuzzing every parser and intake path: no input may crash, hang or be accepted with wrong data.

The default run tries a few hundred inputs per target (seconds each); `make reliability` runs the
`reliability`-marked versions with 10,000 inputs per target. Each test asserts that the crash, hang and
data-lost counts are zero and records its counts for the table (conftest.py).
"""

from __future__ import annotations

import pytest
from fuzz_harness import run_target
from fuzz_recorder_session import remove_stale_session_dirs

TARGETS = {
    "bag_storage": "fuzz_targets:BagStorage",
    "bag_metadata": "fuzz_targets:BagMetadata",
    "bag_semantics": "fuzz_targets:BagSemantics",
    "contracts": "fuzz_targets:Contracts",
    "recorder_messages": "fuzz_targets:RecorderMessages",
    "executor_chunks": "fuzz_targets:ExecutorChunks",
    "policy_server_frames": "fuzz_policy_server:PolicyServerFrames",
    "recorder_dead_sensors": "fuzz_recorder_session:RecorderDeadSensors",
}
QUICK = 300
FULL = 10_000
# Per-input watchdog: far above what any input needs (milliseconds), so only a real hang trips it.
BUDGET_S = 10.0


def fuzz(name: str, count: int, seed: int, record: object) -> None:
    try:
        counts = run_target(TARGETS[name], count, seed=seed, budget_s=BUDGET_S, label=name)
    finally:
        remove_stale_session_dirs()  # the dataset folders its killed workers left in /dev/shm
    record(counts)  # type: ignore[operator]
    assert counts.tried + counts.extra.get("not_run_after_hangs", 0) == count
    assert counts.bad == 0, counts.summary()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz_quick(name: str, reliability_results: object) -> None:
    fuzz(name, QUICK, seed=1, record=reliability_results)


@pytest.mark.reliability
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz_full(name: str, reliability_results: object) -> None:
    fuzz(name, FULL, seed=2, record=reliability_results)
