"""Runs in the LeRobot reference venv: python reference_load.py ROOT. Exit 0 when LeRobotDataset loads ROOT and
reads the first and last frame of every episode; otherwise the last stderr line says why."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lerobot.datasets.lerobot_dataset import LeRobotDataset


def main() -> int:
    dataset = LeRobotDataset("local/reliability-check", root=sys.argv[1])
    for index in range(dataset.num_episodes):
        start = int(dataset.meta.episodes["dataset_from_index"][index])
        stop = int(dataset.meta.episodes["dataset_to_index"][index])
        dataset[start]
        dataset[stop - 1]
    print(f"loaded {dataset.num_episodes} episodes, {len(dataset)} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
