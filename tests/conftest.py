"""Test-suite wide setup: the ROS graph harness (fixtures `ros_domain`, `ros_env`, `processes`, `ros_node`), the
opt-in markers `demo_e2e` (the tiny demo end to end, minutes; `make test-demo`) and `extended` (longer variants of
behaviour the default run proves with a quicker test; `make test-extended`), each skipped unless the run selects it
with ``-m MARKER`` or sets its variable; and, at the end of a run, the skipped tests grouped by reason, each group
with the command that runs it."""

import os
from pathlib import Path

import pytest
from skip_enablers import ENABLE_ALL, skip_summary

pytest_plugins = ["lerobot_ros.testing"]

REPO_ROOT = Path(__file__).resolve().parent.parent


OPT_IN = {  # marker: (the variable that selects it, the reason it skips otherwise)
    "demo_e2e": (
        "LEROBOT_ROS_DEMO_E2E",
        "the tiny demo end to end (2-8 min): run `make test-demo` (or pytest -m demo_e2e)",
    ),
    "extended": (
        "LEROBOT_ROS_EXTENDED",
        "a longer variant of what the default run proves: run `make test-extended` (or pytest -m extended)",
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, (variable, reason) in OPT_IN.items():
        if os.environ.get(variable) == "1" or marker in (config.option.markexpr or ""):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    terminalreporter.section(f"not proved by this run: {len(skipped)} skipped, by reason", sep="=")
    for line in skip_summary(skipped):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"`{ENABLE_ALL}` sets up what they need and runs them all.")


@pytest.fixture(autouse=True)
def _main_thread_scheduling_restored():
    """Tests of the `realtime` option may give the calling thread SCHED_FIFO and an affinity: every test starts
    with the scheduling the run started with, so one test's real-time policy neither leaks into the next test's
    assertions nor leaves pytest's own thread running SCHED_FIFO."""
    if not hasattr(os, "sched_getscheduler"):
        yield
        return
    policy, params, cpus = os.sched_getscheduler(0), os.sched_getparam(0), os.sched_getaffinity(0)
    yield
    if os.sched_getscheduler(0) != policy or os.sched_getparam(0) != params:
        os.sched_setscheduler(0, policy, params)
    if os.sched_getaffinity(0) != cpus:
        os.sched_setaffinity(0, cpus)
