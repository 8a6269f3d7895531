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
* writes logs, checkpoints and progress on rank 0 only.

torchrun was chosen over accelerate because it is part of torch (no new dependency) and its
elastic agent already supervises the workers; LeRobot's trainer uses accelerate, which launches the
same torch.distributed process group underneath.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from lerobot_training.errors import TrainingError

DEFAULT_TIMEOUT_S = 120.0


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
