"""Optimiser, scheduler and RNG state of a run, saved without pickle (safetensors + JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lerobot_training.checkpoint import read_safetensors, write_atomic
from lerobot_training.errors import CheckpointError

TENSORS_NAME = "optimizer.safetensors"
STATE_NAME = "state.json"


def save_training_state(
    directory: Path, optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler, step: int,
    extra: dict[str, Any],
) -> None:  # fmt: skip
    """Write `training_state/`: optimiser moments as tensors, everything else as JSON."""
    from safetensors.torch import save as save_safetensors

    directory.mkdir(parents=True, exist_ok=True)
    state = optimizer.state_dict()
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, param_state in state["state"].items():
        for name, value in param_state.items():
            if isinstance(value, Tensor):
                tensors[f"state.{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(index), {})[name] = value
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for device, rng in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{device}"] = rng
    write_atomic(directory / TENSORS_NAME, save_safetensors(tensors))
    document = {
        "step": step,
        "param_groups": state["param_groups"],
        "scalar_state": scalars,
        "scheduler": {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"},
        **extra,
    }
    write_atomic(directory / STATE_NAME, (json.dumps(document, indent=2) + "\n").encode())


def load_training_state(
    directory: Path, optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler
) -> dict[str, Any]:
    """Restore what `save_training_state` wrote; returns the JSON document (with `step`)."""
    path = directory / STATE_NAME
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing; the checkpoint cannot be resumed") from None
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} is not valid JSON: {err}") from None
    tensors = read_safetensors(directory / TENSORS_NAME)
    param_state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            param_state.setdefault(int(index), {})[name] = value
    for index, values in document.get("scalar_state", {}).items():
        param_state.setdefault(int(index), {}).update(values)
    try:
        optimizer.load_state_dict({"state": param_state, "param_groups": document["param_groups"]})
        scheduler.load_state_dict({**document["scheduler"], "lr_lambdas": [None] * len(optimizer.param_groups)})
    except (KeyError, ValueError) as err:
        raise CheckpointError(f"{directory} does not match this run's optimiser: {err}") from None
    torch.set_rng_state(tensors["rng.torch"])
    if torch.cuda.is_available():
        states = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
        if len(states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(states)
    return dict(document)
