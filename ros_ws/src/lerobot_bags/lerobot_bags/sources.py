"""Where each converted episode came from, so an interrupted conversion resumes and `--append` adds no bag twice.

The record is `meta/lerobot_ros_sources.json` in the dataset (LeRobot's loader reads only info.json, stats.json,
tasks.parquet and the episodes/data/videos files, so it ignores this file, as it ignores meta/contract.json):

    {"format": 1, "hash": HASH_KIND,
     "settings": {SETTINGS_ID: {contract, stamp, align, tolerance_s, task, task_topic, split}},
     "episodes": [{"episode_index", "bag", "bag_hash", "part", "start_stamp_s", "end_stamp_s", "frames",
                   "settings", "run"}],
     "bags": [{"bag", "bag_hash", "settings", "run"}]}

`part` numbers a bag's episode ranges (0 for one-per-bag; the n-th marker or gap range otherwise); `bags` lists
the bags whose conversion ran to the end (a resume skips them without opening them); `run` identifies the
command (its settings and bags), so re-running an interrupted `--append` resumes it while another `--append` of
the same bag is refused.

Crash safety without a second journal: an episode's record is written *before* the writer commits the episode,
naming the index the commit will get. The dataset's `total_episodes` decides: a record whose index the dataset
does not hold (the commit never happened) is dropped when the file is read, so the file never names an episode
that is missing and every committed episode of a run has its record.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lerobot_bags.convert import ConvertOptions
from lerobot_bags.errors import BagError

SOURCES_PATH = "meta/lerobot_ros_sources.json"
FORMAT = 1
SAMPLE_BYTES = 1 << 20
HASH_KIND = (
    "sha256 over the bag's files in name order: name, size, and the whole file up to 2 MiB, else its first and "
    "last MiB (metadata.yaml whole; an mcap's last MiB holds its summary with the chunk CRCs)"
)


def bag_hash(path: Path) -> str:
    """Content fingerprint of a bag folder (or a single .mcap/.db3 file): see HASH_KIND; independent of mtimes."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        size = file.stat().st_size
        digest.update(f"{file.name}\0{size}\0".encode())
        with file.open("rb") as handle:
            if size <= 2 * SAMPLE_BYTES:
                digest.update(handle.read())
            else:
                digest.update(handle.read(SAMPLE_BYTES))
                handle.seek(size - SAMPLE_BYTES)
                digest.update(handle.read(SAMPLE_BYTES))
    return digest.hexdigest()


def settings_of(options: ConvertOptions) -> dict[str, Any]:
    """What decides how a bag becomes episodes (a resume must use the same)."""
    split = options.split
    return {
        "contract": options.contract.to_dict(),
        "stamp": options.stamp,
        "align": options.align,
        "tolerance_s": options.tolerance_s,
        "task": options.task,
        "task_topic": options.task_topic,
        "split": {"kind": split.kind, "topic": split.topic, "gap_s": split.gap_s},
    }


def settings_id(settings: Mapping[str, Any]) -> str:
    """A short stable id of `settings`."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def run_id(settings: str, digests: Sequence[str]) -> str:
    """The id of a command: its settings and its bags in order (the same command run again has the same id)."""
    return settings_id({"settings": settings, "bags": list(digests)})


def _matches(record: Mapping[str, Any], digest: str, settings: str, run: str | None) -> bool:
    return record["bag_hash"] == digest and record["settings"] == settings and (run is None or record.get("run") == run)


@dataclass
class SourceLog:
    """The dataset's source records (see the module docstring)."""

    root: Path
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    bags: list[dict[str, Any]] = field(default_factory=list)
    present: bool = False  # the file existed

    @classmethod
    def load(cls, root: Path, total_episodes: int) -> SourceLog:
        """The records of `root`, without those of episodes the dataset does not hold (see the docstring)."""
        path = root / SOURCES_PATH
        if not path.is_file():
            return cls(root)
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format') if isinstance(data, dict) else None!r}")
            settings = dict(data["settings"])
            episodes = [dict(e) for e in data["episodes"]]
            bags = [dict(b) for b in data["bags"]]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise BagError(f"{path} cannot be read ({err}); move it away to convert without resume records") from None
        kept = [e for e in episodes if int(e["episode_index"]) < total_episodes]
        lost = {e["bag_hash"] for e in episodes if int(e["episode_index"]) >= total_episodes}
        return cls(root, settings, kept, [b for b in bags if b["bag_hash"] not in lost], present=True)

    def parts_of(self, digest: str, settings: str, run: str | None = None) -> set[int]:
        """The parts of bag `digest` converted with `settings` (by the command `run`, when given)."""
        return {int(e["part"]) for e in self.episodes if _matches(e, digest, settings, run)}

    def complete(self, digest: str, settings: str, run: str | None = None) -> bool:
        """True when bag `digest` was converted to its end with `settings` (by the command `run`, when given)."""
        return any(_matches(b, digest, settings, run) for b in self.bags)

    def episodes_of(self, digest: str, other_than_run: str | None = None) -> list[int]:
        """Indices of the episodes converted from bag `digest` (any settings; not those of `other_than_run`)."""
        return [
            int(e["episode_index"])
            for e in self.episodes
            if e["bag_hash"] == digest and (other_than_run is None or e.get("run") != other_than_run)
        ]

    def foreign(self, digests: Sequence[str], settings: str) -> list[dict[str, Any]]:
        """Episode records not made from one of `digests` with `settings` (a resume cannot include them)."""
        return [e for e in self.episodes if e["bag_hash"] not in digests or e["settings"] != settings]

    def add_settings(self, settings: Mapping[str, Any]) -> str:
        ident = settings_id(settings)
        self.settings.setdefault(ident, dict(settings))
        return ident

    def add_episode(self, record: dict[str, Any]) -> None:
        """Record an episode (before its commit) and save."""
        self.episodes = [e for e in self.episodes if e["episode_index"] != record["episode_index"]]
        self.episodes.append(record)
        self.save()

    def add_bag(self, record: dict[str, Any]) -> None:
        """Record a bag converted to its end and save."""
        self.bags.append(record)
        self.save()

    def save(self) -> None:
        """Atomic replace (a temporary file, fsync, rename)."""
        path = self.root / SOURCES_PATH
        data = {
            "format": FORMAT,
            "hash": HASH_KIND,
            "settings": self.settings,
            "episodes": sorted(self.episodes, key=lambda e: int(e["episode_index"])),
            "bags": self.bags,
        }
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w") as handle:
            handle.write(json.dumps(data, indent=1))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
