"""Data safety: staleness accounting with a paused publisher, kill -9 then resume, disk full."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from recorder_helpers import start_recorder, start_streams, status_watcher

from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate

pytestmark = pytest.mark.ros


def test_paused_camera_drops_frames_and_counts_them(processes, ros_node, tmp_path: Path) -> None:
    from diagnostic_msgs.msg import DiagnosticArray

    root = tmp_path / "ds"
    watcher = status_watcher(ros_node)
    diagnostics: list[DiagnosticArray] = []
    ros_node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 50)
    # The front camera falls silent for 0.6 s every 2 s, so a 3 s episode holds at least one whole pause
    # (max_age_s is 0.1 s: about 15 frames of each pause are too old).
    start_streams(
        processes, pause_topics=["/cameras/front/image_raw"], pause_after_s=0.0, pause_for_s=0.6, pause_period_s=2.0
    )
    recorder = start_recorder(processes, root, episode_time_s=3.0, shutdown_when_done=True)
    assert recorder.wait(60) == 0, recorder.output()[-3000:]
    reader = DatasetReader(root)
    frames = len(reader)
    final = watcher.wait_state("stopped", num_episodes=1)
    assert final.frames == frames
    # Frames of the pauses are missing and counted, none were filled in.
    stale = [
        {kv.key: kv.value for kv in status.values}
        for array in diagnostics
        for status in array.status
        if status.name.startswith("lerobot_recorder")
    ]
    assert stale, "no recorder diagnostics seen"
    last = stale[-1]
    front = int(last["observation.images.front.stale_drops"])
    assert front >= 10
    assert int(last["observation.images.wrist.stale_drops"]) < front / 3  # only load hiccups on the live camera
    assert final.dropped >= 10
    assert frames + final.dropped <= 3 * 30 + 1
    assert "disk_free_mb" in last and "encoder_lag_frames" in last and "observation.state.skew_max_s" in last


def test_kill_9_mid_episode_keeps_saved_episodes_and_resume_continues(processes, ros_node, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    watcher = status_watcher(ros_node)
    start_streams(processes)
    recorder = start_recorder(processes, root, episode_time_s=1.0, reset_time_s=0.2, num_episodes=100)
    watcher.wait_state("recording", episode_index=2, timeout=60)
    time.sleep(0.5)
    recorder.send_signal(signal.SIGKILL)
    recorder.wait(10)
    assert validate(root) == []  # staging leftovers of the lost episode are not part of the dataset
    saved = DatasetReader(root).num_episodes
    assert saved == 2

    resumed = start_recorder(
        processes,
        root,
        name="resumed",
        resume=True,
        episode_time_s=1.0,
        num_episodes=1,
        shutdown_when_done=True,
        task="after the crash",
    )
    assert resumed.wait(60) == 0, resumed.output()[-3000:]
    assert validate(root) == []
    reader = DatasetReader(root)
    assert reader.num_episodes == 3
    assert reader[reader.episode_range(2)[0]]["task"] == "after the crash"


def test_disk_full_stops_with_a_clear_error_and_keeps_saved_episodes(processes, ros_node, tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {done.stderr.decode().strip()}")
    try:
        root = mount / "ds"
        watcher = status_watcher(ros_node)
        start_streams(processes)
        recorder = start_recorder(
            processes,
            root,
            video=False,
            episode_time_s=1.0,
            reset_time_s=0.0,
            num_episodes=200,
            shutdown_when_done=True,
        )
        assert recorder.wait(120) == 1, recorder.output()[-3000:]
        error = watcher.wait_state("error")
        assert "disk full" in error.message and "intact" in error.message, error.message
        assert "saved episode" in recorder.output()
        reader = DatasetReader(root)
        assert reader.num_episodes >= 1
        assert reader.num_episodes == error.num_episodes
        assert validate(root, check_videos=False) == []
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
