"""Data-parallel training on torch.distributed, launched by torchrun.

torchrun starts one process per rank with `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` and
`MASTER_PORT` in the environment; `DistributedContext.from_env` reads them (a plain process is a world
of one). The trainer then:

* joins the process group (`gloo` on CPU, `nccl` on CUDA) with a bounded timeout, so a rank that dies
  makes the others fail with an error instead of waiting for ever (torchrun also stops them);
* wraps the policy's loss in `DistributedDataParallel`, which broadcasts rank 0's parameters and
  buffers (the normalisation statistics included, computed once on rank 0) and averages gradients;
* gives each rank its slice of the global batch of `batch_size x world_size` samples, the same samples
  one process at that batch size would draw, so k steps of 2 ranks at batch B equal k steps of 1 process
  at batch 2B;
* writes logs, checkpoints and progress on rank 0 only; the loss it logs is the global batch's (each rank's
  loss all-reduced, weighted by its sample count), which equals one process's loss on that batch.

`lerobot-ros train --nproc N` starts torchrun through `launch` (`python -m lerobot_training.distributed`):
torchrun's launcher in a process of its own with its logging off, so that a failed rank ends the run with one
line (the launching command's) instead of torchrun's traceback and failure table. Each rank of such a run
files its one-line error in the failure folder instead of printing it; `failure_line` reads it back.

torchrun was chosen over accelerate because it is part of torch (no new dependency) and its
elastic agent already supervises the workers; LeRobot's trainer uses accelerate, which launches the
same torch.distributed process group underneath.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import Tensor, nn

from lerobot_training.errors import TrainingError

DEFAULT_TIMEOUT_S = 120.0
# Set by `lerobot-ros train --nproc` for its ranks: the folder where a failing rank files its one-line error.
FAILURE_DIR_ENV = "LEROBOT_ROS_TRAIN_FAILURES"
ROOT_CAUSE_FILE = "torchrun.json"


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in the run: rank among `world_size` processes, `local_rank` on its machine."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DistributedContext:
        """The context torchrun describes in the environment; a world of one when it does not."""
        env = os.environ if environ is None else environ
        if "WORLD_SIZE" not in env:
            return cls()
        try:
            rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"]))
        except (KeyError, ValueError) as err:
            raise TrainingError(
                f"RANK/WORLD_SIZE/LOCAL_RANK are not integers ({err}); start distributed training with torchrun"
            ) from None
        if world < 1 or not 0 <= rank < world:
            raise TrainingError(f"RANK={rank} is not within WORLD_SIZE={world}")
        return cls(rank, world, local)

    def device(self, requested: torch.device) -> torch.device:
        """Each rank's own GPU (by LOCAL_RANK) when training on CUDA; the CPU is shared."""
        if self.enabled and requested.type == "cuda" and requested.index is None:
            return torch.device("cuda", self.local_rank)
        return requested


def init_process_group(context: DistributedContext, device: torch.device, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Join the run's process group (a no-op for a world of one)."""
    if not context.enabled or torch.distributed.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    try:
        torch.distributed.init_process_group(
            backend=backend,
            rank=context.rank,
            world_size=context.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except (RuntimeError, ValueError) as err:
        raise TrainingError(
            f"rank {context.rank} could not join the process group ({backend}): {err}; check MASTER_ADDR/MASTER_PORT "
            "and that every node runs the same torchrun command"
        ) from None


def destroy_process_group() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def end_rank(code: int) -> NoReturn:
    """End a rank whose work is done (files written, output flushed here) without finalizing the interpreter.

    Gloo's worker threads outlive `destroy_process_group` (DistributedDataParallel keeps the group) and release
    each finished collective after its waiter has moved on. When that release comes during the interpreter's
    finalization it needs the GIL for the collective's tensors, the thread is made to exit while a destructor
    runs and the rank dies by SIGABRT ("terminate called without an active exception") after training fine
    (pytorch/pytorch#179291 describes the race). Nothing is left to finalize here, so the rank leaves with its
    exit code at once."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class LossModule(nn.Module):
    """`policy.compute_loss` as `forward`, so that DistributedDataParallel can wrap it."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        result: tuple[Tensor, dict[str, float]] = self.policy.compute_loss(batch)  # type: ignore[operator]
        return result


def data_parallel(policy: nn.Module, context: DistributedContext, device: torch.device) -> nn.Module:
    """A module whose forward is the loss: DDP-wrapped across ranks, plain for a world of one."""
    module = LossModule(policy)
    if not context.enabled:
        return module
    from torch.nn.parallel import DistributedDataParallel

    device_ids: Any = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=device_ids)


def rank_seed(seed: int, context: DistributedContext) -> int:
    """Seed of a rank's torch RNG (noise, dropout): the run's seed on rank 0, a distinct one elsewhere."""
    return seed if context.rank == 0 else seed + 7919 * context.rank


def global_mean(values: Sequence[float], count: int, device: torch.device) -> list[float]:
    """The means of `values` over the global batch: each rank's means weighted by its `count` samples, summed
    over the ranks (an all-reduce every rank must join) and divided by the global count. A world of one: as is."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return list(values)
    totals = torch.tensor([*(v * count for v in values), float(count)], dtype=torch.float64, device=device)
    torch.distributed.all_reduce(totals)
    return [float(total) / float(totals[-1]) for total in totals[:-1]]


def process_group_failure(err: BaseException, context: DistributedContext) -> TrainingError | None:
    """The one-line error of a collective that failed because another rank is gone (gloo: "Connection reset by
    peer"; torch raises these as RuntimeError or DistError), or None for any other error."""
    if not context.enabled or not isinstance(err, RuntimeError):
        return None
    text = str(err)
    if not (isinstance(err, torch.distributed.DistError) or any(t in text for t in ("gloo", "NCCL", "c10d"))):
        return None
    first = " ".join(text.split(". ", maxsplit=1)[0].split())
    return TrainingError(f"the process group failed on rank {context.rank} ({first}): another rank died or stopped")


def file_failure(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """File this rank's one-line error for the launching command (False: not launched by it; print it then)."""
    env = os.environ if environ is None else environ
    folder = env.get(FAILURE_DIR_ENV)
    if not folder:
        return False
    Path(folder, f"rank{env.get('RANK', '0')}.txt").write_text(message)
    return True


def failure_line(folder: Path) -> str:
    """What went wrong in a run `launch` supervised, in words: the first failed rank's own error when it filed
    one, else how it ended (a signal, an exit status); '' when nothing was recorded."""
    try:
        root = json.loads((folder / ROOT_CAUSE_FILE).read_text())
    except (OSError, ValueError):
        root = None
    filed = sorted(folder.glob("rank*.txt"))
    if isinstance(root, dict) and root.get("error"):
        return str(root["error"])
    if isinstance(root, dict) and "rank" in root:
        own = folder / f"rank{root['rank']}.txt"
        if own.is_file():
            return f"rank {root['rank']}: {own.read_text().strip()}"
        if root.get("signal"):
            return f"rank {root['rank']} was killed by {root['signal']}"
        return f"rank {root['rank']} exited with status {root.get('exitcode')}"
    if filed:
        return f"{filed[0].stem.replace('rank', 'rank ')}: {filed[0].read_text().strip()}"
    return ""


def launch(argv: Sequence[str], failure_dir: Path) -> int:
    """Run torchrun (its command-line arguments `argv`) in this process, quietly: 0 when every rank succeeded,
    1 when one failed (the first failure is recorded in `failure_dir`, see `failure_line`)."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logging.disable(logging.CRITICAL)  # torchrun's banner, its SIGTERM notices and its failure report
    os.environ[FAILURE_DIR_ENV] = str(failure_dir)
    try:
        run(parse_args(list(argv)))  # type: ignore[no-untyped-call]
    except ChildFailedError as err:
        rank, failure = err.get_first_failure()
        signal = failure.signal_name() if failure.exitcode < 0 else ""
        cause = {"rank": rank, "exitcode": failure.exitcode, "signal": signal if signal != "<N/A>" else ""}
        (failure_dir / ROOT_CAUSE_FILE).write_text(json.dumps(cause))
        return 1
    except Exception as err:  # torchrun itself failed (rendezvous, a port in use): its error in one line
        message = " ".join(str(err).split()) or type(err).__name__
        (failure_dir / ROOT_CAUSE_FILE).write_text(json.dumps({"error": f"torchrun failed: {message}"}))
        return 1
    return 0


if __name__ == "__main__":
    # python -m lerobot_training.distributed FAILURE_DIR TORCHRUN_ARGS...
    sys.exit(launch(sys.argv[2:], Path(sys.argv[1])))
