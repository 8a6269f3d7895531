"""Atomic episodes: SIGKILL at any moment, a crashing encoder, discarded episodes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from dataset_synthetic import camera_features, create, make_frame, run_dataset_command, write_episodes

from lerobot_dataset import DatasetReader, DatasetWriter, EncoderError, EpisodeStateError
from lerobot_dataset.validate import validate
from lerobot_dataset.video import EpisodeVideoEncoder

HERE = Path(__file__).resolve().parent


def start_writer(root: Path, mode: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, str(HERE / "kill_writer.py"), str(root), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def read_until(proc: subprocess.Popen[str], pattern: str, timeout: float = 60.0) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if re.fullmatch(pattern, line.strip()):
            return lines
    proc.kill()
    raise AssertionError(f"writer did not print {pattern!r}; got {lines}")


def test_sigkill_mid_episode_keeps_earlier_episodes(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    proc = start_writer(root, "mid-episode")
    read_until(proc, "RECORDING")
    time.sleep(0.3)  # frames of the third episode are being encoded now
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)

    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 2
        assert reader[len(reader) - 1]["episode_index"] == 1
    with DatasetWriter.open(root) as writer:  # resumes; staging leftovers are removed
        assert writer.start_episode("after the crash") == 2
        for step in range(4):
            writer.add_frame(make_frame(writer.features, 2, step, 4))
        writer.save_episode()
    assert validate(root) == []
    assert json.loads((root / "meta/info.json").read_text())["total_episodes"] == 3


@pytest.mark.parametrize("delay", [0.05, 0.13, 0.21, 0.34])
def test_sigkill_at_any_moment_leaves_a_valid_dataset(tmp_path: Path, delay: float) -> None:
    root = tmp_path / "ds"
    proc = start_writer(root, "loop")
    read_until(proc, "SAVED 1")
    time.sleep(delay)  # somewhere inside recording or committing a later episode
    proc.send_signal(signal.SIGKILL)
    assert proc.stdout is not None
    saved = [int(m.group(1)) for m in re.finditer(r"SAVED (\d+)", proc.stdout.read())]
    proc.wait(timeout=10)
    last_reported = max([1, *saved])

    # Every episode reported saved is there, LeRobot-loadable, before any repair.
    with DatasetReader(root) as reader:
        assert reader.num_episodes >= last_reported + 1
        for episode in range(last_reported + 1):
            start, end = reader.episode_range(episode)
            assert reader[start]["frame_index"] == 0 and reader[end - 1]["episode_index"] == episode
    problems = validate(root)
    # Only a commit caught between its renames leaves anything to report, and then it says so.
    assert not problems or any("interrupted" in p.message for p in problems), problems
    DatasetWriter.open(root).close()  # rolls an interrupted commit forward
    assert validate(root) == []


def test_crashing_encoder_discards_only_that_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ds"
    writer = create(root)
    write_episodes(writer, [5], ["ok"])

    original = EpisodeVideoEncoder.encode
    calls = {"n": 0}

    def failing_encode(self: EpisodeVideoEncoder, frame: np.ndarray) -> None:
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("encoder exploded")
        original(self, frame)

    monkeypatch.setattr(EpisodeVideoEncoder, "encode", failing_encode)
    writer.start_episode("doomed")
    with pytest.raises(EncoderError, match="encoder exploded"):
        for step in range(40):
            writer.add_frame(make_frame(writer.features, 1, step, 40))
        writer.save_episode()
    monkeypatch.setattr(EpisodeVideoEncoder, "encode", original)

    if writer.episode_frames:  # add_frame raised: the episode is still open
        with pytest.raises(EncoderError):
            writer.save_episode()
    assert writer.num_episodes == 1
    assert validate(root) == []
    assert writer.start_episode("retry") == 1
    for step in range(3):
        writer.add_frame(make_frame(writer.features, 1, step, 3))
    writer.save_episode()
    writer.close()
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.tasks == ["ok", "retry"]


def test_discard_episode_leaves_dataset_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root, features=camera_features(image=False)) as writer:
        write_episodes(writer, [4], ["kept"])
        before = sorted(p.read_bytes() for p in (root / "meta").glob("*.json"))
        writer.start_episode("dropped")
        for step in range(6):
            writer.add_frame(make_frame(writer.features, 1, step, 6))
        writer.discard_episode()
        assert sorted(p.read_bytes() for p in (root / "meta").glob("*.json")) == before
        assert writer.start_episode("next") == 1
        writer.discard_episode()
    assert validate(root) == []


@pytest.mark.parametrize("renames_done", [0, 1, 2, 4, 5])
def test_commit_interrupted_between_renames_rolls_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renames_done: int
) -> None:
    root = tmp_path / "ds"
    with create(root) as writer:
        written = write_episodes(writer, [5, 6], ["a"])
    import lerobot_dataset.commit as commit_mod

    real_replace = os.replace
    calls = {"n": 0}

    def crashing_replace(src: object, dst: object) -> None:
        if str(src).endswith(".tmp"):  # the journal itself
            real_replace(src, dst)  # type: ignore[arg-type]
            return
        if calls["n"] == renames_done:
            raise KeyboardInterrupt("simulated crash between renames")
        calls["n"] += 1
        real_replace(src, dst)  # type: ignore[arg-type]

    writer = DatasetWriter.open(root)
    writer.start_episode("b")
    for step in range(7):
        writer.add_frame(make_frame(writer.features, 2, step, 7))
    monkeypatch.setattr(commit_mod.os, "replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt):
        writer.save_episode()
    monkeypatch.setattr(commit_mod.os, "replace", real_replace)
    with pytest.raises(EpisodeStateError, match="closed"):  # the writer stops; a new open() repairs
        writer.start_episode("c")

    with DatasetReader(root) as reader:  # the two earlier episodes are served unchanged meanwhile
        assert reader.num_episodes >= 2
        np.testing.assert_array_equal(reader[5]["action"], written[1][0]["action"])
    if renames_done:  # half applied: the files disagree until the commit is finished
        assert any("interrupted" in p.message for p in validate(root))
    else:  # nothing moved yet: still the previous commit, consistent (the next open adds the episode)
        assert validate(root) == []

    status, out = run_dataset_command("validate", "--repair", str(root))
    assert status == 0, out
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 3
        assert reader.tasks == ["a", "b"]
        assert reader[len(reader) - 1]["frame_index"] == 6


def test_torn_journal_means_the_commit_never_happened(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root) as writer:
        write_episodes(writer, [4], ["a"])
    staging = root / ".lerobot_ros_staging"
    (staging / "commit").mkdir(exist_ok=True)
    (staging / "commit" / "000-file-000.parquet").write_bytes(b"partial")
    (staging / "commit-journal.json").write_text('{"episode_index": 1, "renames": [["')
    DatasetWriter.open(root).close()
    assert not (staging / "commit-journal.json").exists()
    assert not (staging / "commit").exists()
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 1
