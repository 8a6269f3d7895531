"""Starts nodes through the test harness (`ProcessGroup`), as a test does, then waits to be SIGKILLed.

Usage: parent_death_helper.py WORK_DIR MOMENT KIND [KIND ...], each KIND a key of `nodes()`. Writes
`KIND PID` lines to WORK_DIR/pids as soon as every node is forked, then WORK_DIR/moment once MOMENT is reached:
`forked` (at once: the nodes are still importing), `handling` (each node has its SIGTERM handler installed and
is still starting: creating its node, configuring, waiting for topics) or `running` (each node logged its
running line). The test SIGKILLs this process then.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from lerobot_ros.testing import REPO_ROOT, ProcessGroup, venv_script

SMALL_CONTRACT = REPO_ROOT / "tests" / "lerobot_recorder" / "recorder" / "small_contract.yaml"
ARM_CONTRACT = REPO_ROOT / "config" / "contracts" / "so101.yaml"
MOMENTS = ("forked", "handling", "running")


def nodes(work: Path) -> dict[str, tuple[list[str], str]]:
    """Each node kind: its command line (no hardware; it keeps running) and a line it logs once it runs."""
    return {
        "demo_talker": ([venv_script("demo_talker")], "publishing on"),
        "recorder": (
            [venv_script("recorder"), "--ros-args", "-p", f"contract:={SMALL_CONTRACT}", "-p", f"root:={work / 'ds'}",
             "-p", "task:=t", "-p", "min_free_mb:=0.0", "-p", "startup_timeout_s:=600.0"],
            "recording",
        ),
        "synthetic_streams": (
            [venv_script("synthetic_streams"), "--ros-args", "-p", f"contract:={SMALL_CONTRACT}"], "publishing",
        ),
        "policy_node": (
            [venv_script("policy_node"), "--ros-args", "-p", "checkpoint:=scripted", "-p", f"contract:={ARM_CONTRACT}"],
            "active",
        ),
        "action_executor": (
            [venv_script("action_executor"), "--ros-args", "-r", "__ns:=/harness", "-p", "joint_names:=[a,b]",
             "-p", "joint_limits_lower:=[-1.0,-1.0]", "-p", "joint_limits_upper:=[1.0,1.0]", "-p", "max_velocity:=1.0",
             "-p", "output:=joint_commands"],
            "active",
        ),
        "camera": (
            [venv_script("camera"), "--ros-args", "-p", "device:=synthetic", "-p", "fps:=10.0"], "opened synthetic",
        ),
        "launch": ([venv_script("lerobot-ros"), "launch", "lerobot_ros", "talker.launch.yaml"], "publishing on"),
    }  # fmt: skip


def catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a SIGTERM handler installed (the SigCgt mask of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def main(argv: list[str]) -> int:
    work, moment, *kinds = argv
    work_dir = Path(work)
    table = nodes(work_dir)
    group = ProcessGroup(dict(os.environ), work_dir / "logs")
    started = [(kind, group.start(table[kind][0], name=kind)) for kind in kinds]
    (work_dir / "pids.tmp").write_text("".join(f"{kind} {process.pid}\n" for kind, process in started))
    (work_dir / "pids.tmp").replace(work_dir / "pids")
    for kind, process in started:
        if moment == "handling":
            while not catches_sigterm(process.pid):
                assert process.returncode is None, f"{kind} exited while starting:\n{process.output()}"
                time.sleep(0.01)
        elif moment == "running":
            process.wait_for_output(table[kind][1], timeout=180)
    (work_dir / "moment").write_text(moment)
    threading.Event().wait()  # until SIGKILLed
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
