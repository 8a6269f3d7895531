"""A camera that dies mid-session (its process SIGKILLed): the episode in progress ends early and is saved, no
episode starts while the camera is silent, the status and /diagnostics say why, and the session stops in the
error state after `topic_wait_s` instead of recording episodes with no frames for ever (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from recorder_helpers import CONTRACT, Diagnostics, start_recorder, start_streams, status_watcher

from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_ros.dds import clean_stale_shm

pytestmark = pytest.mark.ros

WRIST = "/cameras/wrist/image_raw"


def _contract_with(tmp_path: Path, keys: list[str], name: str) -> Path:
    """The small contract cut down to `keys` (what one publishing process publishes)."""
    contract = yaml.safe_load(CONTRACT.read_text())
    contract["features"] = {k: v for k, v in contract["features"].items() if k in keys}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(contract))
    return path


def test_a_camera_killed_mid_session_ends_the_episode_and_the_session_stops(
    processes, ros_node, tmp_path: Path
) -> None:
    root = tmp_path / "ds"
    watcher = status_watcher(ros_node)
    diagnostics = Diagnostics(ros_node)
    start_streams(
        processes, contract=str(_contract_with(tmp_path, ["observation.state", "observation.images.front"], "a"))
    )
    wrist = start_streams(
        processes, name="wrist", contract=str(_contract_with(tmp_path, ["observation.images.wrist"], "b"))
    )
    recorder = start_recorder(
        processes,
        root,
        episode_time_s=20.0,
        reset_time_s=0.3,
        num_episodes=3,
        topic_timeout_s=1.0,
        topic_wait_s=3.0,
        shutdown_when_done=True,
    )
    watcher.wait_for(lambda msg: msg.state_name == "recording" and msg.frames >= 15, timeout=60, what="frames")
    wrist.kill()
    # Before: the episode ran its 20 s with every later frame dropped, then each next episode "had no frames" and
    # was recorded again, and the recorder never exited.
    assert recorder.wait(60) == 1, recorder.output()[-3000:]
    out = recorder.output()
    assert f"{WRIST} (observation.images.wrist) sent nothing usable for" in out
    assert "episode 0 ended early and saved" in out and "saved episode 0" in out
    waiting = watcher.wait_for(lambda msg: msg.state_name == "resetting" and WRIST in msg.message, what="the wait")
    assert waiting.message.endswith("the next episode starts when it delivers again"), waiting.message
    final = watcher.wait_state("error", timeout=10)
    assert final.message.startswith(f"{WRIST} (observation.images.wrist) sent nothing usable for"), final.message
    assert "recording stopped after waiting" in final.message and final.num_episodes == 1
    assert diagnostics.wait_for(lambda v: v.get("silent_topics") == WRIST, timeout=10)
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 1 and len(reader) >= 15
    assert validate(root) == []
    clean_stale_shm()  # the killed camera's shared-memory segments
