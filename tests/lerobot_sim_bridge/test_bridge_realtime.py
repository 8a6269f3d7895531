"""The sim bridge's simulation loop with the `realtime` parameters (lerobot_ros.realtime), in-process."""

from __future__ import annotations

import os
import time

import pytest

from tests.lerobot_sim_bridge.conftest import in_process_bridge


def applied(node, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reports = node._realtime.reports()
        if reports:
            return reports[0]
        time.sleep(0.01)
    raise AssertionError(f"the simulation loop never applied its real-time settings within {timeout} s")


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root here")
def test_the_simulation_loop_runs_sched_fifo_and_says_so(ros_domain):
    settings = {"realtime": True, "realtime_priority": 10, "realtime_lock_memory": False}
    with in_process_bridge(ros_domain, **settings) as node:
        node.start()
        report = applied(node)
        assert report.thread == "simulation loop" and report.refused == ()
        assert os.sched_getscheduler(report.native_id) == os.SCHED_FIFO
        assert node._realtime.diagnostic_values()["realtime_policy"] == "SCHED_FIFO 10"


def test_mode_fast_never_runs_sched_fifo(ros_domain):
    """The fast mode steps without sleeping: SCHED_FIFO there would starve a small machine; refused, reported."""
    settings = {"mode": "fast", "realtime": True, "realtime_priority": 10, "realtime_lock_memory": False}
    with in_process_bridge(ros_domain, **settings) as node:
        node.start()
        report = applied(node)
        assert os.sched_getscheduler(report.native_id) == os.SCHED_OTHER
        assert report.policy == "SCHED_OTHER" and "mode fast steps without sleeping" in report.refused[0]
        assert "mode fast" in node._realtime.diagnostic_values()["realtime_refused"]
