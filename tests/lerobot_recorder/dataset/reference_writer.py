"""Writes a small dataset with LeRobot 0.4.4's own writer (create/add_frame/save_episode/finalize).

Runs inside the reference venv (.venv-lerobot-ref): python reference_writer.py ROOT EPISODES
Features match dataset_synthetic.camera_features(); frames are deterministic.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "gripper.pos"]
CAMERA = ["height", "width", "channels"]
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": (4,), "names": NAMES},
    "action": {"dtype": "float32", "shape": (4,), "names": NAMES},
    "next.done": {"dtype": "bool", "shape": (1,), "names": None},
    "observation.images.front": {"dtype": "video", "shape": (48, 64, 3), "names": CAMERA},
    "observation.images.wrist": {"dtype": "image", "shape": (24, 32, 3), "names": CAMERA},
}


def gradient(height: int, width: int, seed: int, step: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[..., 0] = (x * 4 + 9 * seed) % 256
    frame[..., 1] = (y * 5 + 6 * step) % 256
    frame[..., 2] = (40 + 17 * seed + 3 * step) % 256
    return frame


def main() -> int:
    root, episodes = sys.argv[1], int(sys.argv[2])
    dataset = LeRobotDataset.create("local/reference-writer", fps=30, root=root, features=FEATURES, robot_type="so101")
    for episode in range(episodes):
        length = 9 + 2 * episode
        for step in range(length):
            rng = np.random.default_rng(100 * episode + step)
            dataset.add_frame(
                {
                    "observation.state": rng.normal(size=4).astype(np.float32),
                    "action": rng.normal(size=4).astype(np.float32),
                    "next.done": np.array([step == length - 1]),
                    "observation.images.front": gradient(48, 64, episode, step),
                    "observation.images.wrist": gradient(24, 32, episode + 5, step),
                    "task": f"lerobot task {episode % 2}",
                }
            )
        dataset.save_episode()
    dataset.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
