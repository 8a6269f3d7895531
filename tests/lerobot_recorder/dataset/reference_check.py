"""Checks datasets with LeRobot 0.4.4's loader, strictly; one JSON line per root on stdout.

Runs inside the reference venv (.venv-lerobot-ref):
    python reference_check.py ROOT [ROOT ...]
A root passes when `LeRobotDataset` loads it, its data files hold exactly `total_frames` rows
(`len(hf_dataset) == total_frames == len(dataset)`), the episodes table has `total_episodes` rows whose
ranges tile the data, and the first and last frame of every episode (videos included) can be read.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lerobot.datasets.lerobot_dataset import LeRobotDataset


def check(root: str) -> str | None:
    dataset = LeRobotDataset("local/reference-check", root=root)
    meta = dataset.meta
    ensure_loaded = getattr(dataset, "_ensure_hf_dataset_loaded", None)  # LeRobot 0.4.4; 0.6's hf_dataset loads
    if ensure_loaded is not None:
        ensure_loaded()
    rows = len(dataset.hf_dataset)
    if rows != meta.total_frames or len(dataset) != rows:
        return f"hf_dataset has {rows} rows != total_frames {meta.total_frames}"
    if len(meta.episodes) != meta.total_episodes:
        return f"episodes table has {len(meta.episodes)} rows != total_episodes {meta.total_episodes}"
    expected_from = 0
    for ep in meta.episodes:
        if ep["dataset_from_index"] != expected_from:
            return f"episode {ep['episode_index']} starts at {ep['dataset_from_index']}, expected {expected_from}"
        expected_from = ep["dataset_to_index"]
        for i in (ep["dataset_from_index"], ep["dataset_to_index"] - 1):
            item = dataset[i]
            if int(item["episode_index"]) != ep["episode_index"]:
                return f"row {i} belongs to episode {int(item['episode_index'])}, not {ep['episode_index']}"
    if expected_from != rows:
        return f"the episodes cover {expected_from} rows of {rows}"
    return None


def main() -> int:
    for root in sys.argv[1:]:
        try:
            error = check(root)
        except Exception as err:  # any failure of the loader is the answer
            error = f"{type(err).__name__}: {err}"
        print(json.dumps({"root": root, "error": error}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
