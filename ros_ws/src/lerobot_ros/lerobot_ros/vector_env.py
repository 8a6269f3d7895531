"""Several environments stepped together: how many this machine holds, and the gymnasium vector env that runs them.

The bottom of the package graph, so that every evaluation can use it: `lerobot-ros eval --num-envs` and the demo's
eval stage (package lerobot_eval) and the trainer's periodic evaluation (`lerobot-ros train --eval-every`,
package lerobot_training, which imports nothing of lerobot_eval or the sim bridge). Each env runs in a worker
process of its own, started by `spawn`: a fresh interpreter, so no GL context, torch threads or ROS context is
inherited from the caller.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

# Resident memory of one worker (spawned interpreter, MuJoCo model, Mesa EGL renderer of a 320x240 camera, message
# types): measured 0.58 GiB RSS, 0.48 GiB of it its own (psutil USS), on the SO-101 sim; rounded up.
WORKER_MEMORY_BYTES = 640 * 1024**2
# More workers than this many per core only queue for the same cores (and each holds its memory).
WORKERS_PER_CORE = 4
AUTO = "auto"
# Workers start from a fresh interpreter: nothing (GL context, torch threads, ROS context) is inherited.
WORKER_START_METHOD = "spawn"


class MachineLimitError(ValueError):
    """More envs than this machine can hold; the message says how many it can."""


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def max_envs(cores: int, memory_bytes: int | None) -> int:
    """How many envs this machine holds: WORKERS_PER_CORE per core, and a worker's memory each."""
    by_cores = cores * WORKERS_PER_CORE
    if memory_bytes is None:
        return by_cores
    return max(0, min(by_cores, memory_bytes // WORKER_MEMORY_BYTES))


def choose_num_envs(
    requested: str | int,
    episodes: int,
    cores: int | None = None,
    memory_bytes: int | None = -1,
    option: str = "--num-envs",
) -> int:
    """The number of envs to run: `requested` checked against the machine, or (`auto`) one per core, at most one per
    episode. Raises MachineLimitError (one line) when the machine cannot hold `requested`, ValueError when it is
    not a positive number or `auto`; `option` is the command-line option the messages name."""
    cores = available_cores() if cores is None else cores
    memory = available_memory_bytes() if memory_bytes == -1 else memory_bytes
    limit = max_envs(cores, memory)
    memory_text = (
        f", {memory / 1024**3:.1f} GiB available at {WORKER_MEMORY_BYTES / 1024**3:.2f} GiB per env"
        if memory is not None
        else ""
    )
    if requested == AUTO:
        if limit < 1:
            raise MachineLimitError(f"{option}: this machine cannot hold one env ({cores} cores{memory_text})")
        return max(1, min(cores, episodes, limit))
    try:
        count = int(requested)
    except (TypeError, ValueError):
        raise ValueError(f"{option} must be a number >= 1 or '{AUTO}', got {requested!r}") from None
    if count < 1:
        raise ValueError(f"{option} must be >= 1 (or '{AUTO}'), got {count}")
    if count > limit:
        raise MachineLimitError(
            f"{option} {count}: this machine holds at most {limit} envs ({cores} cores x {WORKERS_PER_CORE}"
            f"{memory_text}); pass {option} {limit} or fewer, or {option} {AUTO}"
        )
    return count


def make_vector_env(num_envs: int, env_factory: Callable[[], Any], *, context: str = WORKER_START_METHOD) -> Any:
    """`num_envs` copies of `env_factory()` in spawned worker processes, stepped together (lockstep): a gymnasium
    `AsyncVectorEnv`.

    Observations travel through shared memory; gymnasium's autoreset is off (the caller starts each env's next
    episode: `reset` with a `reset_mask`, or the env itself, like the sim's `SimContractEnv.next_seed`).
    `env_factory` must be picklable (a class, or a `functools.partial` of one) and importable in a fresh
    interpreter.
    """
    from gymnasium.vector import AsyncVectorEnv, AutoresetMode

    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if context not in multiprocessing.get_all_start_methods():
        raise ValueError(f"start method {context!r} is not available here")
    return AsyncVectorEnv(
        [env_factory] * num_envs, shared_memory=True, context=context, autoreset_mode=AutoresetMode.DISABLED
    )


def episodes_per_minute(episodes: int, wall_s: float) -> float:
    """Throughput of a run."""
    return 60.0 * episodes / wall_s if wall_s > 0 and math.isfinite(wall_s) else 0.0
