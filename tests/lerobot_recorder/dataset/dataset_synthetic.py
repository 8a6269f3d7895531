"""Synthetic episodes for the dataset tests: smooth camera frames (codec-friendly) and vectors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lerobot_dataset import DatasetWriter, FeatureSpec

HEIGHT, WIDTH = 48, 64
NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "gripper.pos"]


def camera_features(video: bool = True, image: bool = True) -> dict[str, FeatureSpec]:
    features = {
        "observation.state": FeatureSpec("float32", (4,), NAMES),
        "action": FeatureSpec("float32", (4,), NAMES),
        "next.done": FeatureSpec("bool", (1,)),
    }
    if video:
        features["observation.images.front"] = FeatureSpec("video", (HEIGHT, WIDTH, 3))
    if image:
        features["observation.images.wrist"] = FeatureSpec("image", (HEIGHT // 2, WIDTH // 2, 3))
    return features


def camera_frame(seed: int, step: int, height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """A smooth gradient with a moving square: compresses well, differs between frames."""
    y, x = np.mgrid[0:height, 0:width]
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[..., 0] = (x * 255 // max(width - 1, 1) + 7 * seed) % 256
    frame[..., 1] = (y * 255 // max(height - 1, 1) + 3 * step) % 256
    frame[..., 2] = (64 + 11 * seed + 5 * step) % 256
    top, left = (2 * step) % (height - 8), (3 * step + seed) % (width - 8)
    frame[top : top + 8, left : left + 8] = (255, 255, 255)
    return frame


def make_frame(features: dict[str, FeatureSpec], episode: int, step: int, length: int) -> dict[str, object]:
    rng = np.random.default_rng(1000 * episode + step)
    frame: dict[str, object] = {
        "observation.state": rng.normal(size=4).astype(np.float32),
        "action": rng.normal(size=4).astype(np.float32),
        "next.done": np.array([step == length - 1]),
    }
    for key, spec in features.items():
        if spec.is_camera:
            frame[key] = camera_frame(episode * 13 + len(key), step, spec.shape[0], spec.shape[1])
    return frame


def write_episodes(
    writer: DatasetWriter, lengths: Sequence[int], tasks: Sequence[str], first_episode: int = 0
) -> list[list[dict[str, object]]]:
    """Record one episode per length (task i % len(tasks)); returns the frames written per episode."""
    written = []
    for i, length in enumerate(lengths):
        episode = first_episode + i
        writer.start_episode(tasks[i % len(tasks)])
        frames = [make_frame(writer.features, episode, step, length) for step in range(length)]
        for frame in frames:
            writer.add_frame(frame)
        writer.save_episode()
        written.append(frames)
    return written


def create(root: Path, **kwargs: object) -> DatasetWriter:
    features = kwargs.pop("features", None) or camera_features()
    return DatasetWriter.create(root, repo_id="local/test", fps=30, features=features, **kwargs)  # type: ignore[arg-type]


def run_dataset_command(*argv: str) -> tuple[int, str]:
    """`lerobot-ros dataset ARGV...` in-process: (exit status, stdout). A CommandError gives its exit code."""
    import argparse
    import contextlib
    import io

    from lerobot_recorder.dataset_command import COMMAND
    from lerobot_ros.command import CommandError

    parser = argparse.ArgumentParser(prog="lerobot-ros dataset")
    COMMAND.add_arguments(parser)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            status = COMMAND.run(parser.parse_args(list(argv)))
        except CommandError as err:
            print(err)
            status = err.exit_code
    return status, out.getvalue()
