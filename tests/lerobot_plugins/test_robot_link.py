"""`ContractLink` (the ROS side of `--robot.type=ros`, `--teleop.type=ros` and camera `type: ros`): a read holds
every sample the middleware delivered before it, whatever the process's other threads get to do.

LeRobot's loop is a Python thread that holds the GIL while it works; on a busy host a second thread of the process
also waits for a core. The synthetic streams publish two cameras and joint states from another process while the
reading thread keeps the GIL to itself (`sys.setswitchinterval` far beyond the test, a pure-Python loop around
`newest_frame()`): no other thread of this process runs, so new frames can only come from what the read itself
takes. A link whose messages go through a spinning thread sees no new frame at all then.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
from plugin_stack import REPO

from lerobot_contract import load_contract
from lerobot_robot_ros.link import ContractLink, ReadAges

sys.path.insert(0, str(REPO / "tests" / "lerobot_recorder" / "recorder"))
from recorder_helpers import CONTRACT, start_streams  # joints 100 Hz, two 320x240 cameras 30 Hz

FRAMES = 10  # new frames the reads must see (a third of a second of the 30 fps grid)
WAIT_S = 20.0  # how long the reading thread keeps the GIL waiting for them
HOLD_GIL_S = 1000.0  # switch interval while it waits: no other thread asks for the GIL back in that time


@pytest.mark.ros
def test_frames_advance_while_the_reading_thread_holds_the_gil(processes: Any, ros_domain: int) -> None:
    start_streams(processes)
    contract = load_contract(CONTRACT)
    link = ContractLink(contract, list(contract.features), "test_link")
    link.open(timeout_s=60.0)
    seen: set[int] = set()
    try:
        first = link.newest_frame()
        assert first is not None  # open() waited for it
        switch = sys.getswitchinterval()
        sys.setswitchinterval(HOLD_GIL_S)
        try:
            deadline = time.monotonic() + WAIT_S
            while len(seen) < FRAMES and time.monotonic() < deadline:
                frame = link.newest_frame()
                if frame is not None and frame.time_ns > first.time_ns:
                    seen.add(frame.time_ns)
        finally:
            sys.setswitchinterval(switch)
        values = link.values(link.newest_frame() or first)
    finally:
        link.close()
    assert len(seen) >= FRAMES, (
        f"{len(seen)} new frame(s) in {WAIT_S:g} s while the reading thread held the GIL: the link's frames wait for "
        "another thread of the process"
    )
    assert values["observation.images.front"].shape == (240, 320, 3)


def test_read_ages_give_quantiles_and_the_share_over_a_limit() -> None:
    ages = ReadAges(max_s=1.0)
    assert (ages.count, ages.quantile_s(0.5), ages.share_over(0.1)) == (0, 0.0, 0.0)
    for age_ms in [*range(1, 91), 150, 150, 150, 150, 150, 150, 150, 150, 150, 5000]:  # 90 fresh, 10 older than 0.1 s
        ages.add(age_ms / 1000)
    assert ages.count == 100
    assert ages.quantile_s(0.5) == pytest.approx(0.051)  # the 50th age (50 ms) lies in the bin [50, 51) ms
    assert ages.quantile_s(0.99) == pytest.approx(0.151)
    assert ages.share_over(0.1) == pytest.approx(0.10)
    assert ages.quantile_s(1.0) == pytest.approx(1.001)  # beyond max_s: counted in the last bin
