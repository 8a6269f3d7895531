"""Computes per-episode statistics of a dataset with LeRobot's `compute_episode_stats`.

Runs inside the reference venv: python reference_stats.py ROOT OUT.json (writes {"lerobot": version, "episodes": [...]})
Vectors come from the data parquet; `image` features are written back to PNG files and passed as
paths, exactly as LeRobot's writer does while recording. Video features are skipped (LeRobot
computes their stats from the frames before encoding, which the dataset no longer holds).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import lerobot
import numpy as np
import pyarrow.parquet as pq
from lerobot.datasets.compute_stats import compute_episode_stats


def main() -> int:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    info = json.loads((root / "meta/info.json").read_text())
    features = {k: v for k, v in info["features"].items() if v["dtype"] not in ("video", "string")}
    table = pq.ParquetDataset(sorted(str(p) for p in (root / "data").glob("*/*.parquet"))).read()
    episodes = table.column("episode_index").to_numpy()
    result = []
    with tempfile.TemporaryDirectory() as tmp:
        for episode in np.unique(episodes):
            rows = table.filter(table.column("episode_index").to_numpy() == episode)
            data: dict[str, object] = {}
            for key, feature in features.items():
                column = rows.column(key).to_pylist()
                if feature["dtype"] == "image":
                    paths = []
                    for i, cell in enumerate(column):
                        path = Path(tmp) / f"{episode}-{key}-{i}.png"
                        path.write_bytes(cell["bytes"])
                        paths.append(str(path))
                    data[key] = paths
                else:
                    data[key] = np.asarray(column, dtype=feature["dtype"])
            stats = compute_episode_stats(data, features)
            result.append({key: {name: np.asarray(v).tolist() for name, v in ft.items()} for key, ft in stats.items()})
    out.write_text(json.dumps({"lerobot": lerobot.__version__, "episodes": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
