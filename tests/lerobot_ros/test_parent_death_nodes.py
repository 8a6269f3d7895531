"""Every node the harness starts goes away when the process that started it is SIGKILLed, whatever it was doing.

Seen before: after a SIGKILLed `pytest -m ros` run one recorder kept running with PPID 1 (its parent-death
SIGTERM had come while it was starting). `parent_death_helper.py` starts each kind of node through
`ProcessGroup`, as a test does; it is SIGKILLed as soon as the nodes are forked (still importing), once each has
its SIGTERM handler and is still starting, and once each runs; every node and its children must then exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lerobot_ros.testing import pid_alive

pytestmark = pytest.mark.ros

HELPER = Path(__file__).resolve().with_name("parent_death_helper.py")
# Ample for a node's shutdown on a loaded machine; the wait ends as soon as every process is gone.
EXIT_BOUND_S = 60.0
KINDS = {
    # Started at once, the recorder waits for its topics (configure) for the whole test.
    "forked": ["demo_talker", "recorder", "policy_node", "action_executor", "camera", "launch"],
    "handling": ["demo_talker", "recorder", "policy_node", "action_executor", "camera", "launch"],
    "running": ["demo_talker", "synthetic_streams", "recorder", "policy_node", "action_executor", "camera", "launch"],
}


def _descendants(roots: set[int]) -> set[int]:
    """`roots` and every process below them (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _describe(pids: set[int], logs: Path) -> str:
    lines = []
    for pid in sorted(pids):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
        except FileNotFoundError:
            cmd = "?"
        lines.append(f"  {pid}: {cmd}")
    for log in sorted(logs.glob("*.log")):
        lines.append(f"--- {log.name}:\n" + "\n".join(log.read_text().splitlines()[-15:]))
    return "\n".join(lines)


@pytest.mark.parametrize("moment", list(KINDS))
def test_nodes_exit_when_their_starter_is_sigkilled(ros_env: dict[str, str], tmp_path: Path, moment: str) -> None:
    helper = subprocess.Popen(
        [sys.executable, str(HELPER), str(tmp_path), moment, *KINDS[moment]],
        env=ros_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    nodes: set[int] = set()
    try:
        while not (tmp_path / "moment").exists():
            assert helper.poll() is None, f"the helper exited before {moment}:\n{helper.communicate()[0]}"
            time.sleep(0.02)
        nodes = {int(line.split()[1]) for line in (tmp_path / "pids").read_text().splitlines()}
        tree = _descendants(nodes)  # with the launcher's talker
        os.kill(helper.pid, signal.SIGKILL)
        helper.wait()
        deadline = time.monotonic() + EXIT_BOUND_S
        while alive := {pid for pid in tree if pid_alive(pid)}:
            assert time.monotonic() < deadline, (
                f"SIGKILLed at '{moment}', these still run:\n{_describe(alive, tmp_path / 'logs')}"
            )
            time.sleep(0.05)
    finally:
        if helper.poll() is None:
            os.killpg(helper.pid, signal.SIGKILL)
            helper.wait()
        for pid in _descendants(nodes):
            if pid_alive(pid):
                os.killpg(pid, signal.SIGKILL)


def test_a_sigkilled_launcher_takes_its_nodes_down(processes, tmp_path: Path) -> None:
    """`lerobot-ros launch` SIGKILLed (by the harness's last escalation step, or by hand) cannot stop its nodes
    itself, and they run in sessions of their own: each must get its parent-death signal.

    Seen before: the launched talker kept running with PPID 1 (a recorder did so after a stopped `-m ros` run)."""
    from lerobot_ros.testing import venv_script

    launcher = processes.start([venv_script("lerobot-ros"), "launch", "lerobot_ros", "talker.launch.yaml"])
    line = launcher.wait_for_output(r"process started with pid \[(\d+)\]", timeout=120)
    talker = int(line.group(1))
    launcher.wait_for_output("publishing on", timeout=120)
    assert _descendants({launcher.pid}) == {launcher.pid, talker}
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait(30)
    deadline = time.monotonic() + EXIT_BOUND_S
    try:
        while pid_alive(talker):
            assert time.monotonic() < deadline, f"the talker {talker} still runs after its launcher was SIGKILLed"
            time.sleep(0.05)
    finally:
        if pid_alive(talker):
            os.killpg(talker, signal.SIGKILL)
