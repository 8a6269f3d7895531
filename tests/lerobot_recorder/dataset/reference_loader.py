"""Loads a dataset with LeRobot 0.4.4's `LeRobotDataset` and dumps every frame to an .npz file.

Runs inside the reference venv (.venv-lerobot-ref), never in the project venv:
    python reference_loader.py ROOT OUT.npz [DELTA_JSON]
    python reference_loader.py --jobs JOBS.json   # a list of [ROOT, OUT.npz, DELTA or null]: one start-up for all
Keys in the .npz: `<feature>` stacked over all frames (cameras as uint8 H,W,C), `task` (strings),
`len`, and with DELTA_JSON (a {key: [deltas]} object) `delta/<key>`, `delta/<key>_is_pad` for
every frame.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset


def to_numpy(value: object) -> np.ndarray:
    array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)  # type: ignore[union-attr]
    return array


def main() -> int:
    if sys.argv[1] == "--jobs":
        with open(sys.argv[2]) as jobs:
            for root, out, delta in json.load(jobs):
                dump(root, out, delta)
        return 0
    dump(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
    return 0


def dump(root: str, out: str, delta: dict[str, list[float]] | None) -> None:
    dataset = LeRobotDataset("local/reference-check", root=root)
    camera_keys = set(dataset.meta.camera_keys)
    columns: dict[str, list[np.ndarray]] = {}
    tasks: list[str] = []
    for i in range(len(dataset)):
        item = dataset[i]
        for key, value in item.items():
            if key == "task":
                tasks.append(str(value))
                continue
            array = to_numpy(value)
            if key in camera_keys:
                array = np.round(array.transpose(1, 2, 0) * 255.0).astype(np.uint8)
            columns.setdefault(key, []).append(array)
    result = {key: np.stack(values) for key, values in columns.items()}
    result["task"] = np.array(tasks)
    result["len"] = np.array(len(dataset))
    result["num_episodes"] = np.array(dataset.num_episodes)
    if delta:
        windowed = LeRobotDataset("local/reference-check", root=root, delta_timestamps=delta)
        stacks: dict[str, list[np.ndarray]] = {}
        for i in range(len(windowed)):
            item = windowed[i]
            for key in delta:
                for name in (key, f"{key}_is_pad"):
                    array = to_numpy(item[name])
                    if name in camera_keys:
                        array = np.round(array.transpose(0, 2, 3, 1) * 255.0).astype(np.uint8)
                    stacks.setdefault(f"delta/{name}", []).append(array)
        result.update({key: np.stack(values) for key, values in stacks.items()})
    np.savez(out, **result)


if __name__ == "__main__":
    sys.exit(main())
