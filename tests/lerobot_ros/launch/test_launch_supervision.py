"""The launcher as a real process: output prefixes, ordered shutdown, required processes, respawn.

The children here are small Python programs (no ROS graph); `test_launch_graph.py` runs real nodes.
"""

from __future__ import annotations

import re
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from launch_helpers import alive, start_launcher, started_pids

from lerobot_ros.testing import ProcessGroup, venv_script

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    ignore = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else []
    for name in ignore:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    exit_code = int(sys.argv[2]) if len(sys.argv) > 2 else None
    print("ready", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if exit_code is not None:
        time.sleep(float(sys.argv[3]))
        sys.exit(exit_code)
    while True:
        time.sleep(0.05)
    """
)


@pytest.fixture
def child_cmd(tmp_path: Path) -> str:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return f"{sys.executable} {script}"


def test_sigint_stops_every_child_escalating_to_sigterm_and_sigkill(
    processes: ProcessGroup, write_launch, child_cmd: str, tmp_path: Path
) -> None:
    path = write_launch(
        f"""
        launch:
          - executable: {{cmd: "{child_cmd}", name: polite, output: screen}}
          - executable: {{cmd: "{child_cmd} SIGINT", name: deaf_to_int, output: screen}}
          - executable: {{cmd: "{child_cmd} SIGINT,SIGTERM", name: deaf, output: log, sigkill_timeout: 0.5}}
        """
    )
    launcher = start_launcher(processes, path, tmp_path, "--sigterm-timeout", "1", "--sigkill-timeout", "1")
    launcher.wait_for_output(r"^\[polite-1\] ready$")
    launcher.wait_for_output(r"^\[deaf_to_int-2\] ready$")
    launcher.wait_for_output(r"^\[deaf-3\] to stderr$")  # output: log still shows stderr
    pids = {label: pid for label, (pid,) in started_pids(launcher).items()}
    assert set(pids) == {"polite-1", "deaf_to_int-2", "deaf-3"}
    assert "[deaf-3] ready" not in launcher.output()  # its stdout only goes to the log file
    log = tmp_path / "log" / "deaf-3.log"
    deadline = time.monotonic() + 10
    while "ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ready" in log.read_text()

    launcher.send_signal(signal.SIGINT)
    assert launcher.wait(timeout=20) == 0
    output = launcher.output()
    assert "[INFO] [launch]: shutting down: SIGINT received" in output
    assert "[WARNING] [deaf_to_int-2]: did not stop after SIGINT; sending SIGTERM" in output
    assert "[WARNING] [deaf-3]: did not stop after SIGTERM; sending SIGKILL" in output
    assert "[polite-1]: did not stop" not in output
    assert [pid for pid in pids.values() if alive(pid)] == []


def test_failing_required_process_stops_the_others_and_fails_the_launch(
    processes: ProcessGroup, write_launch, child_cmd: str, tmp_path: Path
) -> None:
    path = write_launch(
        f"""
        launch:
          - executable: {{cmd: "{child_cmd}", name: bystander}}
          - executable: {{cmd: "{child_cmd} '' 3 0.5", name: critical, on_exit: shutdown}}
        """
    )
    launcher = start_launcher(processes, path, tmp_path)
    assert launcher.wait(timeout=30) == 1
    output = launcher.output()
    assert re.search(
        r"\[ERROR\] \[critical-2\]: process has died \[pid \d+, exit code 3, cmd '.*child.py '' 3 0.5'\]", output
    )
    assert "shutting down: required process critical-2 exited with 3 (on_exit: shutdown)" in output
    assert not alive(started_pids(launcher)["bystander-1"][0])


def test_required_process_exiting_cleanly_shuts_down_with_status_0(
    processes: ProcessGroup, write_launch, child_cmd: str, tmp_path: Path
) -> None:
    path = write_launch(
        f"""
        launch:
          - executable: {{cmd: "{child_cmd}", name: bystander}}
          - executable: {{cmd: "{child_cmd} '' 0 0.2", name: job, on_exit: shutdown}}
        """
    )
    launcher = start_launcher(processes, path, tmp_path)
    assert launcher.wait(timeout=30) == 0
    assert "shutting down: required process job-2 exited with 0" in launcher.output()


def test_respawn_with_delay_and_retry_limit(
    processes: ProcessGroup, write_launch, child_cmd: str, tmp_path: Path
) -> None:
    path = write_launch(
        f"""
        launch:
          - executable:
              cmd: "{child_cmd} '' 7 0.1"
              name: flaky
              output: screen
              respawn: "true"
              respawn_delay: 0.2
              respawn_max_retries: 2
        """
    )
    launcher = start_launcher(processes, path, tmp_path)
    assert launcher.wait(timeout=30) == 0
    output = launcher.output()
    assert len(started_pids(launcher)["flaky-1"]) == 3
    assert output.count("[INFO] [flaky-1]: respawning in 0.2 s") == 2
    assert output.count("[flaky-1] ready") == 3
    assert output.rstrip().endswith("[INFO] [launch]: all processes have exited")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_the_launcher_is_a_clean_shutdown(
    processes: ProcessGroup, write_launch, child_cmd: str, tmp_path: Path, sig: signal.Signals
) -> None:
    path = write_launch(f'launch:\n  - executable: {{cmd: "{child_cmd}", name: worker, output: screen}}\n')
    launcher = start_launcher(processes, path, tmp_path)
    launcher.wait_for_output(r"^\[worker-1\] ready$")
    (pid,) = started_pids(launcher)["worker-1"]
    launcher.send_signal(sig)
    assert launcher.wait(timeout=20) == 0
    assert f"shutting down: {sig.name} received" in launcher.output()
    assert not alive(pid)


def test_children_get_the_dds_environment_and_set_env_changes(
    processes: ProcessGroup, write_launch, tmp_path: Path, ros_env: dict[str, str]
) -> None:
    path = write_launch(
        """
        launch:
          - set_env: {name: MODE, value: fast}
          - unset_env: {name: LAUNCH_TEST_VAR}
          - executable:
              name: env_probe
              output: screen
              cmd: >-
                sh -c 'echo "MODE=$MODE VAR=${LAUNCH_TEST_VAR-unset} DOMAIN=$ROS_DOMAIN_ID
                PROFILE=${FASTDDS_DEFAULT_PROFILES_FILE##*/} RMW=$RMW_IMPLEMENTATION"'
        """
    )
    env = {k: v for k, v in ros_env.items() if k not in ("FASTDDS_DEFAULT_PROFILES_FILE", "RMW_IMPLEMENTATION")}
    env["LAUNCH_TEST_VAR"] = "present"
    launcher = processes.start(
        [venv_script("lerobot-ros"), "launch", "--log-dir", str(tmp_path / "log"), str(path)], name="launcher", env=env
    )
    assert launcher.wait(timeout=30) == 0
    expected = (
        f"[env_probe-1] MODE=fast VAR=unset DOMAIN={env['ROS_DOMAIN_ID']} PROFILE=fastdds_shm.xml RMW=rmw_fastrtps_cpp"
    )
    assert expected in launcher.output()


def test_grandchildren_are_stopped_with_their_process_group(
    processes: ProcessGroup, write_launch, tmp_path: Path
) -> None:
    # A background job of a non-interactive shell ignores SIGINT; it must still be gone afterwards.
    path = write_launch(
        """
        launch:
          - executable: {cmd: "sh -c 'sleep 600 & echo grandchild $! ; wait'", name: parent, output: screen}
        """
    )
    launcher = start_launcher(processes, path, tmp_path)
    grandchild = int(launcher.wait_for_output(r"^\[parent-1\] grandchild (\d+)$").group(1))
    assert alive(grandchild)
    launcher.send_signal(signal.SIGINT)
    assert launcher.wait(timeout=20) == 0
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)  # killed, but reaped by init asynchronously
    assert not alive(grandchild)


def test_timer_log_and_shutdown_run_in_order(
    processes: ProcessGroup, write_launch, child_cmd: str, tmp_path: Path
) -> None:
    """`log` prints at once, a `timer` starts its process later, a `shutdown` in a timer stops everything."""
    path = write_launch(
        f"""
        launch:
          - log: {{message: "hello $(var missing world)"}}
          - executable: {{cmd: "{child_cmd}", name: first, output: screen}}
          - timer:
              period: 0.5
              children:
                - executable: {{cmd: "{child_cmd}", name: later, output: screen}}
                - timer: {{period: 0.5, children: [{{shutdown: {{reason: enough}}}}]}}
          - timer: {{period: 600.0, children: [{{executable: {{cmd: "{child_cmd}", name: never}}}}]}}
        """
    )
    launcher = start_launcher(processes, path, tmp_path)
    assert launcher.wait(timeout=30) == 0
    out = launcher.output()
    order = [
        out.index("[INFO] [launch.user]: hello world"),
        out.index("[first-1] ready"),
        out.index("[later-2] ready"),
        out.index("shutting down: enough (shutdown action at test.launch.yaml:8)"),
    ]
    assert order == sorted(order)
    assert "never" not in out  # the pending timer is cancelled by the shutdown
    assert not any(alive(pid) for pids in started_pids(launcher).values() for pid in pids)


def test_emulate_tty_gives_the_process_a_terminal(processes: ProcessGroup, write_launch, tmp_path: Path) -> None:
    script = tmp_path / "tty.py"
    script.write_text("import sys\nprint('stdout tty', sys.stdout.isatty(), flush=True)\n")
    path = write_launch(
        f"""
        launch:
          - executable: {{cmd: "{sys.executable} {script}", name: tty, output: screen, emulate_tty: true}}
          - executable: {{cmd: "{sys.executable} {script}", name: pipe, output: screen}}
        """
    )
    launcher = start_launcher(processes, path, tmp_path)
    assert launcher.wait(timeout=30) == 0
    assert "[tty-1] stdout tty True" in launcher.output()
    assert "[pipe-2] stdout tty False" in launcher.output()


def test_own_log_prints_nothing_and_full_prints_both_streams(
    processes: ProcessGroup, write_launch, tmp_path: Path
) -> None:
    script = tmp_path / "talk.py"
    script.write_text("import sys\nprint('out line', flush=True)\nprint('err line', file=sys.stderr, flush=True)\n")
    path = write_launch(
        f"""
        launch:
          - executable: {{cmd: "{sys.executable} {script}", name: quiet, output: own_log}}
          - executable: {{cmd: "{sys.executable} {script}", name: loud, output: full}}
        """
    )
    launcher = start_launcher(processes, path, tmp_path)
    assert launcher.wait(timeout=30) == 0
    out = launcher.output()
    assert "[quiet-1] " not in out
    assert "[loud-2] out line" in out and "[loud-2] err line" in out
    # Both streams still reach the process log file (their order between the two pipes is not fixed).
    assert sorted((tmp_path / "log" / "quiet-1.log").read_text().splitlines()) == ["err line", "out line"]
