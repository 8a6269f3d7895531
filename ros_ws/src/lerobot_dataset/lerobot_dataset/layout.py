"""File names and numbering of a LeRobot v3.0 dataset, and atomic file replacement."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CODEBASE_VERSION = "v3.0"
DEFAULT_CHUNKS_SIZE = 1000
DEFAULT_DATA_FILES_SIZE_MB = 100
DEFAULT_VIDEO_FILES_SIZE_MB = 200

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
# Work area of the writer: episode staging, temporary files and the commit journal. LeRobot's
# loader only globs data/*/*.parquet and meta/episodes/*/*.parquet, so it never sees this folder.
STAGING_DIR = ".lerobot_ros_staging"


@dataclass(frozen=True, order=True)
class FileRef:
    """A (chunk_index, file_index) pair naming one data, video or episodes file."""

    chunk: int
    file: int

    def next(self, chunks_size: int) -> FileRef:
        """The file after this one: file_index counts up to chunks_size - 1, then a new chunk starts."""
        if self.file + 1 >= chunks_size:
            return FileRef(self.chunk + 1, 0)
        return FileRef(self.chunk, self.file + 1)

    def fmt(self, template: str, **extra: str) -> str:
        return template.format(chunk_index=self.chunk, file_index=self.file, **extra)


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    with path.open("rb") as f:
        os.fsync(f.fileno())


def size_mb(path: Path) -> float:
    return path.stat().st_size / (1024 * 1024)
