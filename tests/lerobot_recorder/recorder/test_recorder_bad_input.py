"""Bad input: missing topics, wrong types, images changing size, clock jumps, odd tasks, another schema."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml
from recorder_helpers import CONTRACT, start_recorder, start_streams, status_watcher

from lerobot_dataset import DatasetReader, DatasetWriter, FeatureSpec
from lerobot_dataset.validate import validate

pytestmark = pytest.mark.ros


def test_missing_topics_fail_at_startup_naming_them(processes, tmp_path: Path) -> None:
    recorder = start_recorder(processes, tmp_path / "ds", startup_timeout_s=1.0, shutdown_when_done=True)
    assert recorder.wait(30) == 1
    out = recorder.output()
    assert "never appeared within 1 s" in out
    for topic in ("/follower/joint_states", "/cameras/front/image_raw", "/cameras/wrist/image_raw"):
        assert topic in out
    assert not (tmp_path / "ds").exists()


def test_wrong_message_type_is_named(processes, tmp_path: Path) -> None:
    data = yaml.safe_load(CONTRACT.read_text())
    data["features"]["observation.images.front"]["topic"] = "/follower/joint_states"  # a JointState topic
    contract = tmp_path / "wrong.yaml"
    contract.write_text(yaml.safe_dump(data))
    start_streams(processes)
    recorder = start_recorder(processes, tmp_path / "ds", contract=str(contract), shutdown_when_done=True)
    assert recorder.wait(40) == 1
    assert (
        "/follower/joint_states is published as sensor_msgs/msg/JointState but contract" in recorder.output()
        and "declares sensor_msgs/msg/Image for observation.images.front" in recorder.output()
    )


BAD_PARAMETERS = [
    ({"task": '"two\\nlines"'}, "control characters"),  # YAML escape: a real newline
    ({"task": ""}, "parameter `task` is empty"),
    ({"contract": "/nonexistent/contract.yaml"}, "contract /nonexistent/contract.yaml: <file>: cannot read"),
]


def test_bad_parameters_fail_at_configure(processes, tmp_path: Path) -> None:
    started = [
        (
            start_recorder(
                processes, tmp_path / f"ds{i}", name=f"rec{i}", shutdown_when_done=True, startup_timeout_s=0.0, **params
            ),
            expected,
        )
        for i, (params, expected) in enumerate(BAD_PARAMETERS)
    ]
    for recorder, expected in started:
        assert recorder.wait(40) == 1
        assert expected in recorder.output()


def test_root_of_another_schema_or_existing_root_is_refused(processes, tmp_path: Path) -> None:
    root = tmp_path / "other"
    with DatasetWriter.create(root, repo_id="t/other", fps=30, features={"x": FeatureSpec("float32", (2,))}) as w:
        w.start_episode("other")
        w.add_frame({"x": [1.0, 2.0]})
        w.save_episode()
    start_streams(processes)
    resumed = start_recorder(processes, root, resume=True, shutdown_when_done=True)
    fresh = start_recorder(processes, root, name="fresh", shutdown_when_done=True)
    assert resumed.wait(40) == 1
    assert "holds a different schema" in resumed.output() and "observation.state" in resumed.output()
    assert fresh.wait(40) == 1
    assert "already exists; pass resume:=true" in fresh.output()
    assert DatasetReader(root).num_episodes == 1 and validate(root) == []


def test_images_changing_size_are_dropped_with_a_clear_error(processes, ros_node, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    watcher = status_watcher(ros_node)
    start_streams(processes, resize_after_s=8.0)
    recorder = start_recorder(processes, root, episode_time_s=1.0, reset_time_s=0.1, num_episodes=100)
    # Each image of another size is left out where it comes in (as the bag converter does), naming why.
    error = watcher.wait_for(lambda m: "message ignored" in m.message, timeout=60, what="an image size error")
    assert "image is 160x120, the contract declares shape [240, 320, 3]" in error.message
    saved = error.num_episodes
    recorder.send_signal(signal.SIGINT)
    recorder.wait(20)
    reader = DatasetReader(root)
    assert reader.num_episodes >= saved >= 1  # nothing saved before is lost
    assert validate(root) == []
    shapes = {reader[i]["observation.images.front"].shape for i in range(0, len(reader), 10)}
    assert shapes == {(240, 320, 3)}


def test_clock_jumping_back_ends_the_episode_and_keeps_it(processes, ros_node, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    watcher = status_watcher(ros_node)
    # From 4 s on, the stamps go back 30 s every 3 s (a sim resetting its clock); episodes would last 30 s.
    start_streams(processes, jump_back_after_s=4.0, jump_back_s=30.0, jump_period_s=3.0)
    recorder = start_recorder(processes, root, episode_time_s=30.0, reset_time_s=0.1, num_episodes=100)
    jump = watcher.wait_for(lambda m: "clock was reset" in m.message, timeout=60, what="a clock jump")
    assert "episode was ended there and saved" in jump.message
    after = watcher.wait_for(lambda m: m.num_episodes >= jump.num_episodes + 1, timeout=30, what="more episodes")
    recorder.send_signal(signal.SIGINT)
    recorder.wait(20)
    assert validate(root) == []
    reader = DatasetReader(root)
    assert reader.num_episodes >= after.num_episodes
    for episode in range(reader.num_episodes):
        first, last = reader.episode_range(episode)
        assert last - first <= 5 * 30  # each episode ended at a jump (every 3-4 s), none ran its 30 s
