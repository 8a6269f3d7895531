"""Lockstep capped at real time (`lockstep_real_time_factor: 1`), what `lerobot-ros demo record` runs.

The bridge steps once the scripted expert answered each observation, and never sooner than the scaled wall
deadline, so simulated time never runs ahead of wall time (a busy machine only makes it slower). Checked from
the receive times of joint_states (sim stamps): between the least delayed sample and the last one, wall time
passed is at least the simulated time passed, up to that sample's own transport delay (< one step).
"""

from __future__ import annotations

import time

import pytest
from sensor_msgs.msg import JointState
from test_bridge_ros import NS, RELIABLE, stamp_s, start_bridge

from lerobot_ros.testing import venv_script
from lerobot_sim_bridge import topics

pytestmark = pytest.mark.ros
DT = 1.0 / 30.0


def test_lockstep_with_a_real_time_factor_of_one_never_runs_ahead_of_the_wall_clock(processes, sim_env, ros_node):
    received: list[tuple[float, float]] = []  # (sim stamp, wall receive time)
    ros_node.create_subscription(
        JointState, f"{NS}/{topics.JOINT_STATES}", lambda m: received.append((stamp_s(m), time.monotonic())), RELIABLE
    )
    bridge = start_bridge(processes, sim_env, mode="lockstep", seed=0, lockstep_real_time_factor=1.0)
    expert = processes.start(
        [venv_script("scripted_expert"), "--ros-args", "-r", f"__ns:={NS}", "-p", "episodes:=1", "-p", "seed:=0"],
        name="expert",
        env=sim_env,
    )
    done = expert.wait_for_output(r"scripted expert done: (\d+)/(\d+) episodes successful", timeout=120)
    assert done.group(1) == "1", bridge.output()
    bridge.stop()
    stamps = sorted({stamp: wall for stamp, wall in received}.items())  # first receipt of each observation
    assert len(stamps) > 40, f"only {len(stamps)} observations received"
    first_half = stamps[: len(stamps) // 2]
    anchor_sim, anchor_wall = min(first_half, key=lambda item: item[1] - item[0])  # the least delayed
    last_sim, last_wall = stamps[-1]
    assert last_wall - anchor_wall >= (last_sim - anchor_sim) - DT, (
        f"{last_sim - anchor_sim:.3f} s simulated in {last_wall - anchor_wall:.3f} s of wall time"
    )
