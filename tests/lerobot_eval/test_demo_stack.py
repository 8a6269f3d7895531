"""The demo's launched stack dies with the demo process, even when the demo is killed by SIGKILL.

Seen before the fix: the parent-death hook was written but never passed to Popen, so a killed `lerobot-ros demo`
(or a killed test run that started one) left the launcher and its nodes running with PPID 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lerobot_ros.testing import pid_alive

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]
TALKER = REPO / "ros_ws/src/lerobot_ros/launch/talker.launch.yaml"

DEMO = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from lerobot_eval.demo.stack import LaunchedStack

    stack = LaunchedStack(Path(sys.argv[1]), {"rate_hz": "10.0"}, Path(sys.argv[2]))
    print(stack.process.pid, flush=True)
    time.sleep(600)
    """
)


def test_a_killed_demo_process_takes_its_launched_stack_down(ros_env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "stack.log"
    demo = subprocess.Popen(
        [sys.executable, "-c", DEMO, str(TALKER), str(log)], env=ros_env, stdout=subprocess.PIPE, text=True
    )
    launcher = 0
    try:
        assert demo.stdout is not None
        launcher = int(demo.stdout.readline())
        deadline = time.monotonic() + 60
        while "publishing on" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, f"the talker did not start: {log.read_text()}"
            time.sleep(0.1)
        demo.kill()
        demo.wait(10)
        deadline = time.monotonic() + 30
        while pid_alive(launcher):
            assert time.monotonic() < deadline, f"launcher {launcher} still runs after the demo was killed"
            time.sleep(0.05)
        assert "SIGINT" in log.read_text()  # the launcher stopped its nodes in order
    finally:
        if demo.poll() is None:
            demo.kill()
        if launcher and pid_alive(launcher):
            os.killpg(launcher, signal.SIGKILL)
