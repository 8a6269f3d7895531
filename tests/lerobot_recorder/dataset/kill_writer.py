"""Subprocess for the SIGKILL tests: records episodes and reports progress on stdout.

    python kill_writer.py ROOT MODE
MODE `mid-episode`: save 2 episodes, start a third, add frames forever (prints SAVED n, then RECORDING).
MODE `loop`: save episodes in a loop forever (prints SAVED n after each commit).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dataset_synthetic import camera_features, make_frame

from lerobot_dataset import DatasetWriter


def main() -> int:
    root, mode = Path(sys.argv[1]), sys.argv[2]
    if (root / "meta").exists():
        writer = DatasetWriter.open(root)
    else:
        writer = DatasetWriter.create(root, repo_id="local/kill", fps=30, features=camera_features())
    episode = writer.num_episodes
    while True:
        writer.start_episode(f"task {episode % 3}")
        length = 8 + episode % 5
        if mode == "mid-episode" and episode >= 2:
            print("RECORDING", flush=True)
            step = 0
            while True:
                writer.add_frame(make_frame(writer.features, episode, step % 50, 50))
                step += 1
        for step in range(length):
            writer.add_frame(make_frame(writer.features, episode, step, length))
        writer.save_episode()
        print(f"SAVED {episode}", flush=True)
        episode += 1


if __name__ == "__main__":
    sys.exit(main())
