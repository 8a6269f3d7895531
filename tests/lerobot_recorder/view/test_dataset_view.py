"""`lerobot-ros dataset view ROOT --episode N --save FILE.rrd`: the episode's entities read back from the .rrd
(Rerun's own reader; see rrd_contents.py for why not a screenshot), datasets without videos, a missing video
file, a bag2dataset dataset's sync report, and the one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from rrd_contents import read_rrd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "dataset"))
sys.path.insert(0, str(HERE.parent / "bags"))

from dataset_synthetic import (  # noqa: E402
    NAMES,
    camera_features,
    create,
    run_dataset_command,
    write_episodes,
)

from lerobot_dataset import DatasetReader  # noqa: E402
from lerobot_ros.testing import reference_env, reference_python  # noqa: E402


@pytest.fixture(scope="module")
def two_episodes(tmp_path_factory):
    """Episode 0 (8 frames, 'pick the cube') and 1 (6 frames, 'place it'): a video camera, a PNG camera."""
    root = tmp_path_factory.mktemp("view") / "ds"
    writer = create(root, video_codec="h264")
    frames = write_episodes(writer, [8, 6], ["pick the cube", "place it"])
    writer.close()
    return root, frames


def test_episode_shows_decoded_cameras_plots_and_task(two_episodes, tmp_path):
    root, frames = two_episodes
    rrd = tmp_path / "episode.rrd"
    status, out = run_dataset_command("view", str(root), "--episode", "1", "--save", str(rrd))
    assert status == 0, out
    assert "episode 1: 6 frames" in out
    entities = read_rrd(rrd)
    written = frames[1]
    for j, name in enumerate(NAMES):
        state = entities[f"/joints/{name}/state"]
        np.testing.assert_allclose(state.scalars("frame"), [f["observation.state"][j] for f in written], rtol=1e-6)
        assert state.times["frame"] == [0, 1, 2, 3, 4, 5]
        np.testing.assert_allclose(
            entities[f"/joints/{name}/action"].scalars("frame"), [f["action"][j] for f in written], rtol=1e-6
        )
    np.testing.assert_allclose(entities["/features/next.done/0"].scalars("frame"), [0, 0, 0, 0, 0, 1])
    with DatasetReader(root) as reader:
        start, _ = reader.episode_range(1)
        for camera in ("front", "wrist"):
            key = f"observation.images.{camera}"
            entity = entities[f"/cameras/{camera}"]
            assert entity.rows == 6, camera
            for k in range(6):
                picture = np.frombuffer(bytes(entity.columns["Image:buffer"][k][0]), np.uint8)
                # The frame the dataset holds, decoded (front is an h264 video, wrist a PNG) ...
                np.testing.assert_array_equal(picture.reshape(written[k][key].shape), reader.value(start + k, key))
                # ... is the picture that was recorded (h264 is lossy on these tiny frames).
                error = np.abs(picture.reshape(written[k][key].shape).astype(int) - written[k][key]).mean()
                assert error < (12.0 if camera == "front" else 1e-9), (camera, k, error)
    assert "place it" in entities["/task"].static_texts[0]
    assert "/sync/report" not in entities  # not a bag2dataset dataset


def test_image_rate_decimates_pictures_not_plots(two_episodes, tmp_path):
    root, _ = two_episodes
    rrd = tmp_path / "decimated.rrd"
    status, out = run_dataset_command("view", str(root), "--save", str(rrd), "--image-rate", "10")
    assert status == 0, out
    entities = read_rrd(rrd)
    assert entities["/cameras/front"].times["frame"] == [0, 3, 6]  # 30 fps / 10 Hz: every third frame
    assert len(entities[f"/joints/{NAMES[0]}/state"].scalars()) == 8


def test_dataset_without_cameras_shows_plots_and_says_so(tmp_path):
    root = tmp_path / "no_cameras"
    writer = create(root, features=camera_features(video=False, image=False))
    write_episodes(writer, [5], ["pick the cube"])
    writer.close()
    rrd = tmp_path / "plots.rrd"
    status, out = run_dataset_command("view", str(root), "--save", str(rrd))
    assert status == 0, out
    assert "warning: this dataset has no camera features" in out
    entities = read_rrd(rrd)
    assert not [path for path in entities if path.startswith("/cameras")]
    assert len(entities[f"/joints/{NAMES[0]}/state"].scalars()) == 5
    assert any("no camera features" in text for text in entities["/view/problems"].texts())


def test_a_missing_video_file_hides_only_that_camera(tmp_path):
    root = tmp_path / "lost_video"
    writer = create(root, video_codec="h264")
    write_episodes(writer, [5], ["pick the cube"])
    writer.close()
    for video in (root / "videos" / "observation.images.front").rglob("*.mp4"):
        video.unlink()
    rrd = tmp_path / "lost.rrd"
    status, out = run_dataset_command("view", str(root), "--save", str(rrd))
    assert status == 0, out
    assert "warning: observation.images.front:" in out
    entities = read_rrd(rrd)
    assert "/cameras/front" not in entities
    assert entities["/cameras/wrist"].rows == 5
    assert len(entities[f"/joints/{NAMES[0]}/state"].scalars()) == 5


def test_bag2dataset_dataset_shows_its_sync_report(tmp_path):
    from bag_helpers import SMALL, convert

    from lerobot_bags.synthetic import contract_for, write_synthetic_bag

    bag = write_synthetic_bag(tmp_path / "bag", SMALL)
    root = tmp_path / "from_bag"
    convert([bag], contract_for(SMALL), root)
    rrd = tmp_path / "sync.rrd"
    status, out = run_dataset_command("view", str(root), "--save", str(rrd))
    assert status == 0, out
    assert "sync report: shown under sync/" in out
    entities = read_rrd(rrd)
    report = entities["/sync/report"].static_texts[0]
    assert "Sync report of episode 0" in report and "| observation.images.front |" in report
    assert entities["/sync/observation.state/max_skew_s"].static_rows == 1
    assert entities["/cameras/front"].rows == 30
    # Per frame: each feature's skew (frame time minus the stamp of the sample it took) and its reused frames.
    entry = json.loads((tmp_path / "from_bag.sync_report.json").read_text())["runs"][0]["episodes"][0]
    assert set(entry["per_frame"]) == set(contract_for(SMALL).features)
    for key, record in entry["per_frame"].items():
        skew = entities[f"/sync/{key}/skew_ms"]
        assert skew.times["frame"] == list(range(30)), key
        np.testing.assert_allclose(skew.scalars("frame"), record["skew_ms"])
        reused = entities[f"/sync/{key}/reused"].scalars("frame")
        assert [k for k in range(30) if reused[k] == 1.0] == record["reused_frames"], key
        assert set(reused) <= {0.0, 1.0}
    assert max(entry["per_frame"]["observation.state"]["skew_ms"]) > 0.0  # a real series, not all zeros

    # A report whose per-frame record does not fit the episode (the dataset changed since) is not plotted.
    path = tmp_path / "from_bag.sync_report.json"
    report = json.loads(path.read_text())
    report["runs"][0]["episodes"][0]["per_frame"]["action"]["skew_ms"].pop()
    path.write_text(json.dumps(report))
    status, out = run_dataset_command("view", str(root), "--save", str(rrd))
    assert status == 0, out
    assert "warning: sync report: 29 per-frame skews of action for an episode of 30 frames" in out
    entities = read_rrd(rrd)
    assert "/sync/action/skew_ms" not in entities and "/sync/observation.state/skew_ms" in entities


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--episode", "2"], r"--episode 2: .* has 2 episode\(s\) \(0..1\)"),
        (["--episode", "-1"], r"--episode -1: .* has 2 episode\(s\)"),
        (["--image-rate", "-1"], r"--image-rate must be >= 0"),
        (["--save", "view.txt"], r"the file name must end in .rrd"),
    ],
)
def test_bad_arguments_are_one_line(two_episodes, tmp_path, monkeypatch, argv, message):
    import re

    monkeypatch.chdir(tmp_path)
    root, _ = two_episodes
    if "--save" not in argv:
        argv = [*argv, "--save", str(tmp_path / "x.rrd")]
    status, out = run_dataset_command("view", str(root), *argv)
    assert status == 2
    assert len(out.strip().splitlines()) == 1, out
    assert re.search(message, out), out


def test_not_a_dataset(tmp_path):
    status, out = run_dataset_command("view", str(tmp_path), "--save", str(tmp_path / "x.rrd"))
    assert status == 2
    assert out.strip() == (
        f"{tmp_path} is not a LeRobot dataset (no meta/info.json); pass the dataset root folder or a Hub repo id"
    )


def test_a_hub_repo_id_is_viewed_from_the_huggingface_cache(two_episodes, tmp_path):
    """`dataset view user/name`: the snapshot in HF_HUB_CACHE (offline: no network call); one that is not cached
    is a one-line error saying so and how to get it."""
    import os
    import subprocess

    from lerobot_ros.testing import write_hub_cache

    root, _ = two_episodes
    cache = tmp_path / "hf-cache"
    write_hub_cache(cache, "someone/two_episodes", root, "0123456789abcdef0123456789abcdef01234567")
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}

    def view(repo_id: str, rrd: Path) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "lerobot_ros.cli", "dataset", "view", repo_id, "--episode", "1", "--save", rrd]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)

    shown = view("someone/two_episodes", tmp_path / "hub.rrd")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "episode 1: 6 frames" in shown.stdout
    assert read_rrd(tmp_path / "hub.rrd")["/cameras/front"].rows == 6
    absent = view("someone/absent", tmp_path / "absent.rrd")
    assert absent.returncode == 2 and not (tmp_path / "absent.rrd").exists()
    lines = absent.stderr.strip().splitlines()
    assert lines[-1].endswith(
        "someone/absent: not in the local Hugging Face cache and the Hub cannot be reached "
        "(HF_HUB_OFFLINE=1 or no network); download it once online or pass a local folder"
    ), absent.stderr


def test_no_viewer_available_names_the_alternatives(two_episodes, monkeypatch):
    """No display for a viewer window (a headless machine, an ssh session): one line naming --save and --web."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    root, _ = two_episodes
    status, out = run_dataset_command("view", str(root))
    assert status == 2
    assert len(out.strip().splitlines()) == 1, out
    assert "no display for a viewer window" in out
    assert "--save FILE.rrd" in out and "--web" in out and "--connect" in out


@pytest.mark.reference
@pytest.mark.skipif(
    not reference_python().exists(),
    reason="the LeRobot reference venv is absent; build it with scripts/setup.sh --with-lerobot-reference",
)
def test_dataset_written_by_lerobot(tmp_path):
    """Any LeRobot v3 dataset: one written by LeRobot 0.4.4's own LeRobotDataset (video and PNG cameras)."""
    import subprocess

    root = tmp_path / "lerobot-written"
    result = subprocess.run(
        [str(reference_python()), str(HERE.parent / "dataset" / "reference_writer.py"), str(root), "2"],
        env=reference_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rrd = tmp_path / "lerobot.rrd"
    status, out = run_dataset_command("view", str(root), "--episode", "1", "--save", str(rrd))
    assert status == 0, out
    entities = read_rrd(rrd)
    with DatasetReader(root) as reader:
        start, end = reader.episode_range(1)
        for camera in ("front", "wrist"):
            assert entities[f"/cameras/{camera}"].rows == end - start
        expected = [reader.value(row, "observation.state")[0] for row in range(start, end)]
        np.testing.assert_allclose(entities[f"/joints/{NAMES[0]}/state"].scalars("frame"), expected, rtol=1e-6)
        assert reader[start]["task"] in entities["/task"].static_texts[0]
