"""The test harness itself: domain leases, process cleanup, output waiting."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

from lerobot_ros.testing import ProcessGroup, lease_domain


def test_domain_leases_are_exclusive(tmp_path):
    leases = [lease_domain(tmp_path) for _ in range(20)]
    try:
        ids = [lease.domain_id for lease in leases]
        assert len(set(ids)) == len(ids)
        assert all(1 <= i <= 232 for i in ids)
    finally:
        for lease in leases:
            lease.release()


def test_released_domain_can_be_leased_again(tmp_path):
    held = [lease_domain(tmp_path) for _ in range(232)]
    with pytest.raises(RuntimeError, match="all ROS domain ids"):
        lease_domain(tmp_path)
    freed = held.pop(5)
    freed.release()
    again = lease_domain(tmp_path)
    assert again.domain_id == freed.domain_id
    for lease in [*held, again]:
        lease.release()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_stop_all_kills_stubborn_children_and_grandchildren(tmp_path):
    script = textwrap.dedent(
        """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sleeper = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", sleeper])
        print("grandchild", child.pid, flush=True)
        time.sleep(600)
        """
    )
    group = ProcessGroup(os.environ, tmp_path)
    proc = group.start([sys.executable, "-c", script], name="stubborn")
    grandchild = int(proc.wait_for_output(r"grandchild (\d+)", timeout=10).group(1))
    started = time.monotonic()
    for p in group:
        p.stop(sigint_timeout=0.5, sigterm_timeout=0.5)
    assert time.monotonic() - started < 30
    assert proc.returncode is not None
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    assert (tmp_path / "stubborn.log").read_text().startswith("grandchild")


def test_wait_for_output_reports_exit(tmp_path):
    group = ProcessGroup(os.environ, tmp_path)
    proc = group.start([sys.executable, "-c", "print('hello'); raise SystemExit(3)"], name="short")
    assert proc.wait_for_output("hello").group(0) == "hello"
    with pytest.raises(AssertionError, match="exited with 3"):
        proc.wait_for_output("never printed", timeout=10)
    group.stop_all()
