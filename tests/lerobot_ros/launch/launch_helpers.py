"""Helpers for tests that run `lerobot-ros launch` as a real process."""

from __future__ import annotations

import re
from pathlib import Path

from lerobot_ros.testing import ManagedProcess, ProcessGroup, venv_script


def start_launcher(processes: ProcessGroup, launch_file: Path, tmp_path: Path, *extra: str) -> ManagedProcess:
    """`lerobot-ros launch [extra...] FILE` with its logs under tmp_path/log; options and name:=value go in `extra`."""
    options = [e for e in extra if ":=" not in e]
    arguments = [e for e in extra if ":=" in e]
    return processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            "--log-dir",
            str(tmp_path / "log"),
            *options,
            str(launch_file),
            *arguments,
        ],
        name="launcher",
    )


def started_pids(launcher: ManagedProcess) -> dict[str, list[int]]:
    """Label -> pids, from the launcher's `process started with pid [N]` lines (respawns add pids)."""
    pids: dict[str, list[int]] = {}
    for label, pid in re.findall(r"\[INFO\] \[([\w.-]+)\]: process started with pid \[(\d+)\]", launcher.output()):
        pids.setdefault(label, []).append(int(pid))
    return pids


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for init to reap it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
