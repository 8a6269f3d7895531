"""The recorder on sim time (`use_sim_time:=true`), clocked by `lerobot-ros bag play --clock`.

Its clock is the bag's: the session starts once the topics deliver, the episode lasts `episode_time_s` of bag
time, and the frames hold what the bag's robot did at the bag times the frame grid gives.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from recorder_helpers import start_recorder, status_watcher

from lerobot_bags.synthetic import SO101_JOINTS, SyntheticBagSpec, contract_for, joint_positions
from lerobot_contract.time import NS
from lerobot_dataset import DatasetReader
from lerobot_recorder.recorder.session import WAITING_FOR_CLOCK
from lerobot_ros.testing import venv_script


def play(processes: Any, bag: Path, *extra: str) -> Any:
    return processes.start(
        [venv_script("lerobot-ros"), "bag", "play", str(bag), "--wait-for-subscribers", *extra], name="bag-play"
    )


@pytest.mark.ros
def test_recorder_on_sim_time_records_the_bags_clock(processes: Any, ros_node: Any, tmp_path: Path) -> None:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message

    from lerobot_msgs.msg import RecorderStatus

    spec = SyntheticBagSpec(duration_s=4.0, cameras=(), storage="mcap")
    from lerobot_bags.synthetic import write_synthetic_bag

    bag = write_synthetic_bag(tmp_path / "bag", spec)
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(contract_for(spec).raw, sort_keys=False))
    markers: list[bytes] = []
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    ros_node.create_subscription(RecorderStatus, "/recorder/episode_start", markers.append, reliable, raw=True)
    watcher = status_watcher(ros_node)
    root = tmp_path / "sim"
    episode_s = 1.5
    recorder = start_recorder(
        processes,
        root,
        contract=str(contract),
        use_sim_time=True,
        reliable=True,
        episode_time_s=episode_s,
        shutdown_when_done=True,
        startup_timeout_s=0.0,  # the player waits for the recorder's subscriptions instead
    )
    # Configured, and saying what it waits for (its timers run on the bag's clock, which has not started).
    watcher.wait_state("idle", timeout=30, message=WAITING_FOR_CLOCK)
    deadline = time.monotonic() + 10
    while not ros_node.count_publishers("/recorder/episode_start") and time.monotonic() < deadline:
        time.sleep(0.05)  # the marker of the episode's start must reach this node
    player = play(processes, bag, "--clock")  # 40 Hz, as ros2 bag play --clock
    assert player.wait(60) == 0, player.output()[-3000:]
    summary = json.loads(player.output()[player.output().rindex("\n{") :])
    assert summary["published"]["/follower/joint_states"] == 401
    saved = watcher.wait_state("stopped", timeout=20)  # names the recorder's last state when it fails
    assert saved.num_episodes == 1, saved.message
    assert recorder.wait(30) == 0, recorder.output()[-3000:]

    data = DatasetReader(root)
    assert data.num_episodes == 1
    first, end = data.episode_range(0)
    frames = end - first
    # 1.5 s of bag time at 30 fps (the session ends on the bag's clock, not on the wall clock)
    assert abs(frames - episode_s * 30) <= 2, (frames, recorder.output()[-1500:])
    (marker,) = markers
    stamp = deserialize_message(marker, RecorderStatus).header.stamp
    start_ns = stamp.sec * NS + stamp.nanosec
    assert spec.start_ns <= start_ns <= spec.start_ns + round(spec.duration_s * NS)  # the bag's time, not 0
    for i in range(frames):
        row = data[first + i]
        # Frame i is at t0 + i/30 s of bag time; its state is the newest joint sample at or before it
        # (100 Hz, +-2 ms jitter): within one sample period of the synthetic robot's pose at that time.
        t_s = float(row["timestamp"])
        assert t_s == pytest.approx(i / 30, abs=1e-4)
    states = np.stack([np.asarray(data[first + i]["observation.state"]) for i in range(frames)])
    t0_s = _best_t0(states, (start_ns - spec.start_ns) / NS)
    assert t0_s >= (start_ns - spec.start_ns) / NS - 0.02  # no frame from before the episode start
    for i in range(frames):
        expected = np.degrees(joint_positions(t0_s + i / 30, len(SO101_JOINTS)))[:5]
        np.testing.assert_allclose(states[i, :5], expected, atol=0.7, err_msg=f"frame {i}")


def _best_t0(states: Any, after_s: float) -> float:
    """The bag time of frame 0: where the synthetic trajectory fits the recorded states best (1 ms steps)."""
    candidates = np.arange(after_s - 0.05, after_s + 0.5, 0.001)
    errors = []
    for t0 in candidates:
        rows = np.stack([np.degrees(joint_positions(t0 + i / 30, len(SO101_JOINTS)))[:5] for i in range(len(states))])
        errors.append(float(np.abs(rows - states[:, :5]).max()))
    return float(candidates[int(np.argmin(errors))])
