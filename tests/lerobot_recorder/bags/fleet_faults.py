"""A fault injected into one fleet task (importable by datatrove's forkserver workers, unlike a test module)."""

from __future__ import annotations

from typing import Any

from lerobot_bags.fleet import ConvertShard, FleetJob


class CrashOnce(ConvertShard):
    """Task `rank` raises the first time it runs (a marker file in the logging dir remembers it ran)."""

    def __init__(self, job: FleetJob, rank: int) -> None:
        super().__init__(job)
        self.crash_rank = rank

    def run(self, data: Any = None, rank: int = 0, world_size: int = 1) -> None:
        marker = self.job.logging_dir / f"crashed-{rank}"
        if rank == self.crash_rank and not marker.exists():
            marker.touch()
            raise RuntimeError(f"injected fault in task {rank}")
        super().run(data, rank, world_size)
