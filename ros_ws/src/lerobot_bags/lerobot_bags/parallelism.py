"""How many bags to convert at once, and how many threads each camera encoder gets, from the cores that are free.

`--jobs N` asks for up to N worker processes; each runs a reader thread and one encoder per camera. On cores
that other processes keep busy, more processes do not get more CPU: they add process start-up and cache
misses and make the conversion slower than `--jobs 1`. So the conversion measures the idle CPU of the cores
it may run on (`IdleProbe`: /proc/stat over the conversion's own start-up, the load average where that cannot
be read) and `choose_parallelism` runs at most one job per idle core, and caps each camera encoder's threads so
that jobs x cameras x threads stays within the idle cores (an encoder left to its defaults starts a thread
per core of the machine: SVT-AV1 ~47 threads per encoder on 2 cores).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

IDLE_WINDOW_S = 0.1  # the shortest window the idle CPU is measured over (/proc/stat counts in 10 ms ticks)


@dataclass(frozen=True)
class Parallelism:
    """What a conversion runs with: `jobs` bags at once, `encoder_threads` threads per camera encoder."""

    jobs: int
    encoder_threads: int
    requested: int
    cores: int
    idle_cores: float
    note: str | None = None  # one line when `jobs` is below `requested` for want of cores, saying why

    def as_dict(self) -> dict[str, object]:
        return {
            "jobs": self.jobs,
            "requested_jobs": self.requested,
            "encoder_threads": self.encoder_threads,
            "cores": self.cores,
            "idle_cores": round(self.idle_cores, 2),
            "note": self.note,
        }


def choose_parallelism(requested: int, *, bags: int, cameras: int, cores: int, idle_cores: float) -> Parallelism:
    """Jobs and encoder threads for `requested` jobs over `bags` bags with `cameras` cameras each, on `cores`
    cores of which `idle_cores` (a measured, fractional count) are idle.

    A job needs a core of its own to pay for itself, so jobs <= the idle cores rounded to the nearest whole
    core (at least 1: a conversion always runs) and <= the bags; each camera encoder gets the idle cores left
    per camera of each job (at least 1 thread).
    """
    if requested < 1 or cores < 1 or bags < 0 or cameras < 0:
        raise ValueError(f"requested ({requested}) and cores ({cores}) must be >= 1, bags and cameras >= 0")
    idle = min(float(cores), max(0.0, idle_cores)) if math.isfinite(idle_cores) else 0.0
    free = math.floor(idle + 0.5)
    jobs = max(1, min(requested, bags, free))
    note = None
    if jobs < min(requested, max(bags, 1)):
        why = (
            f"{idle:.1f} of the {cores} core(s) this process may use are idle"
            if free < cores
            else f"this process may use {cores} core(s)"
        )
        note = f"--jobs {requested} runs as --jobs {jobs}: {why} (more jobs than idle cores convert slower)"
    threads = max(1, free // (jobs * max(cameras, 1)))
    return Parallelism(jobs, threads, requested, cores, idle, note)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cpu_times(cpus: set[int] | None) -> dict[int, tuple[int, int]] | None:
    """Per CPU of `cpus` (all when None): (idle ticks, total ticks) from /proc/stat; None when unreadable."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    out: dict[int, tuple[int, int]] = {}
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or not name[3:].isdigit():
            continue
        cpu = int(name[3:])
        if cpus is not None and cpu not in cpus:
            continue
        ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
        out[cpu] = (ticks[3] + ticks[4], sum(ticks))
    return out or None


class IdleProbe:
    """The idle cores among those this process may use, over a window that starts when the probe is made.

    Start it before other work (a conversion's checks of its bags): the CPU this process uses meanwhile counts
    as available to it, so the window costs no waiting unless it is shorter than `IDLE_WINDOW_S`.
    """

    def __init__(self) -> None:
        try:
            self._cpus: set[int] | None = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self._cpus = None
        self._start = (time.monotonic(), time.process_time(), _cpu_times(self._cpus))

    def idle_cores(self, min_window_s: float = IDLE_WINDOW_S) -> float:
        """Idle cores since the probe started (e.g. 1.6 of 2), this process's own use counted as idle.

        From /proc/stat; where it cannot be read, the usable cores minus the 1-minute load average.
        """
        wall0, own0, before = self._start
        time.sleep(max(0.0, min_window_s - (time.monotonic() - wall0)))
        after = _cpu_times(self._cpus)
        if before is None or after is None:
            try:
                return max(0.0, usable_cores() - os.getloadavg()[0])
            except OSError:
                return float(usable_cores())
        idle = 0.0
        for cpu, (idle_after, total_after) in after.items():
            idle_before, total_before = before.get(cpu, (idle_after, total_after))
            if total_after > total_before:
                idle += (idle_after - idle_before) / (total_after - total_before)
        wall = time.monotonic() - wall0
        own = (time.process_time() - own0) / wall if wall > 0 else 0.0
        return min(float(len(after)), idle + own)


def measure_idle_cores(window_s: float = IDLE_WINDOW_S) -> float:
    """Idle cores among those this process may use over the next `window_s` (see `IdleProbe`)."""
    return IdleProbe().idle_cores(window_s)
