"""A pytest run that is stopped by a signal (CI's SIGTERM, Ctrl-C, SIGKILL) leaves no node it started running.

Seen before the fix: SIGTERM killed pytest outright (Python's default), no fixture teardown ran, and the nodes
that `processes` had started (each in its own session) kept running with PPID 1.
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

INNER_TEST = textwrap.dedent(
    """
    import os
    import time

    from lerobot_ros.testing import venv_script


    def test_starts_a_node_and_waits(processes):
        node = processes.start([venv_script("demo_talker")], name="talker")
        node.wait_for_output("publishing on", timeout=60)
        with open(os.environ["NODE_PID_FILE"] + ".tmp", "w") as out:
            out.write(str(node.pid))
        os.replace(os.environ["NODE_PID_FILE"] + ".tmp", os.environ["NODE_PID_FILE"])
        time.sleep(600)
    """
)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signalled_pytest_run_leaves_no_node_running(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["lerobot_ros.testing"]\n')
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    pid_file = tmp_path / "node.pid"
    env = {**os.environ, "NODE_PID_FILE": str(pid_file)}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    node = 0
    try:
        _wait(lambda: pid_file.exists() or run.poll() is not None, 120, "the inner test did not start its node")
        assert run.poll() is None, run.communicate()[0]
        node = int(pid_file.read_text())
        assert pid_alive(node)
        run.send_signal(sig)
        output = run.communicate(timeout=60)[0]
        # The node is stopped by the fixture's teardown (SIGTERM, SIGINT), or by its parent-death signal (SIGKILL).
        _wait(lambda: not pid_alive(node), 30, f"node {node} still runs after pytest got {sig.name}:\n{output}")
        if sig is not signal.SIGKILL:
            assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        if node and pid_alive(node):
            os.kill(node, signal.SIGKILL)
