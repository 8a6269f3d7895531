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

# The inner runs' tests: start a node through `processes`, write its pid where the outer test reads it, then wait.
INNER_HEADER = textwrap.dedent(
    """
    import os
    import time

    from lerobot_ros.testing import venv_script


    def start_talker(processes):
        node = processes.start([venv_script("demo_talker")], name="talker")
        node.wait_for_output("publishing on", timeout=60)
        with open(os.environ["NODE_PID_FILE"] + ".tmp", "w") as out:
            out.write(str(node.pid))
        os.replace(os.environ["NODE_PID_FILE"] + ".tmp", os.environ["NODE_PID_FILE"])
    """
)

INNER_TEST = INNER_HEADER + textwrap.dedent(
    """

    def test_starts_a_node_and_waits(processes):
        start_talker(processes)
        time.sleep(600)
    """
)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _inner_pytest(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """The inner run, started as from a terminal: its own session, SIGINT at its default (Python's
    KeyboardInterrupt). Inherited, SIGINT could be ignored: a shell script's `cmd &` and some CI runners start
    this run so, the inner pytest kept SIG_IGN and the SIGINT case waited 60 s for an exit that never came."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=_sigint_default,  # noqa: PLW1509 - one signal() in the child
    )  # fmt: skip


def _output_once_exited(run: subprocess.Popen[str], sig: signal.Signals) -> str:
    """The inner run's output once it exited; a run still up 60 s after `sig` is made to dump every thread's stack
    (SIGABRT: pytest's faulthandler) so that the failure says where it hangs."""
    try:
        return run.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        run.send_signal(signal.SIGABRT)
        try:
            output = run.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            output = run.communicate()[0]
        raise AssertionError(f"pytest still ran 60 s after {sig.name}; its output and stacks:\n{output}") from None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signalled_pytest_run_leaves_no_node_running(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["lerobot_ros.testing"]\n')
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    pid_file = tmp_path / "node.pid"
    env = {**os.environ, "NODE_PID_FILE": str(pid_file)}
    run = _inner_pytest(tmp_path, env)
    node = 0
    try:
        _wait(lambda: pid_file.exists() or run.poll() is not None, 120, "the inner test did not start its node")
        assert run.poll() is None, run.communicate()[0]
        node = int(pid_file.read_text())
        assert pid_alive(node)
        run.send_signal(sig)
        output = _output_once_exited(run, sig)
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


SWALLOWING_TESTS = INNER_HEADER + textwrap.dedent(
    """

    def test_code_under_test_catches_the_interrupt(processes):
        start_talker(processes)
        try:  # as `lerobot_ros.cli.main` does when a test runs a command in-process (exit status 130)
            time.sleep(600)
        except KeyboardInterrupt:
            pass


    def test_next():
        open(os.environ["NEXT_TEST_FILE"], "w").close()
    """
)


def test_a_sigterm_ends_the_run_even_when_the_code_under_test_catches_the_interrupt(tmp_path: Path) -> None:
    """The SIGTERM's KeyboardInterrupt can land in code that catches it (`lerobot_ros.cli.main` returns 130 on
    it); the run must still end after that test's teardown, and no later test may start.

    Seen before: pytest went on with the next tests, and ignored every later SIGTERM (only SIGKILL stopped it)."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["lerobot_ros.testing"]\n')
    (tmp_path / "test_inner.py").write_text(SWALLOWING_TESTS)
    pid_file, next_test = tmp_path / "node.pid", tmp_path / "next-test-ran"
    env = {**os.environ, "NODE_PID_FILE": str(pid_file), "NEXT_TEST_FILE": str(next_test)}
    run = _inner_pytest(tmp_path, env)
    node = 0
    try:
        _wait(lambda: pid_file.exists() or run.poll() is not None, 120, "the inner test did not start its node")
        assert run.poll() is None, run.communicate()[0]
        node = int(pid_file.read_text())
        run.send_signal(signal.SIGTERM)
        output = _output_once_exited(run, signal.SIGTERM)
        assert run.returncode == pytest.ExitCode.INTERRUPTED, output
        assert not next_test.exists(), f"a test started after the SIGTERM:\n{output}"
        assert not pid_alive(node), output  # stopped by the first test's teardown
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        if node and pid_alive(node):
            os.kill(node, signal.SIGKILL)


STUBBORN_CHILD_TESTS = textwrap.dedent(
    """
    import os
    import sys

    import pytest

    STUBBORN = (
        "import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)];"
        "print('up', flush=True); time.sleep(600)"
    )


    @pytest.fixture
    def teardown_started():
        yield
        open(os.environ["TEARDOWN_FILE"], "w").close()  # torn down before `processes` (set up after it)


    def test_a_child_that_ignores_sigint_and_sigterm(processes, teardown_started):
        child = processes.start([sys.executable, "-c", STUBBORN], name="stubborn")
        child.wait_for_output("up", timeout=60)
        with open(os.environ["NODE_PID_FILE"] + ".tmp", "w") as out:
            out.write(str(child.pid))
        os.replace(os.environ["NODE_PID_FILE"] + ".tmp", os.environ["NODE_PID_FILE"])
    """
)


def test_a_sigterm_during_teardown_still_stops_every_process(tmp_path: Path) -> None:
    """A SIGTERM that comes while `processes` is stopping a test's processes (SIGINT sent, waiting) must not cut
    that teardown short: a process that ignores SIGINT and SIGTERM (no parent-death signal stops it) must still
    be killed. Seen before: the KeyboardInterrupt ended `stop_all` half-way and the process ran on with PPID 1."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["lerobot_ros.testing"]\n')
    (tmp_path / "test_inner.py").write_text(STUBBORN_CHILD_TESTS)
    pid_file, teardown = tmp_path / "node.pid", tmp_path / "teardown-started"
    env = {**os.environ, "NODE_PID_FILE": str(pid_file), "TEARDOWN_FILE": str(teardown)}
    run = _inner_pytest(tmp_path, env)
    child = 0
    try:
        _wait(lambda: teardown.exists() or run.poll() is not None, 120, "the inner test did not reach its teardown")
        assert run.poll() is None, run.communicate()[0]
        child = int(pid_file.read_text())
        run.send_signal(signal.SIGTERM)  # `processes` has sent SIGINT (ignored) and waits to escalate
        output = run.communicate(timeout=60)[0]
        assert run.returncode == pytest.ExitCode.INTERRUPTED, output
        assert not pid_alive(child), f"the child {child} still runs after the interrupted teardown:\n{output}"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        if child and pid_alive(child):
            os.kill(child, signal.SIGKILL)
