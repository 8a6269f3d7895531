"""The checkpoint directory the policy node loads, and loading of LeRobot ACT checkpoints.

Layout written by `save_policy`:

* `config.json`: the policy config with LeRobot's field names (`type`, `input_features` and
  `output_features` with shapes and names, `normalization_mapping`, `chunk_size`/`horizon`, ...), plus
  a `lerobot_ros` object: `config_version`, `fps`, `chunk_length`, `n_action_steps`, the normalisation
  mode of every feature, the contract file name and where the weights came from.
* `model.safetensors`: every weight and buffer, the normalisation statistics included
  (`normalizer.buffer_<feature>.<stat>`).
* `contract.yaml`: the robot contract the dataset was recorded with (when the dataset carried one).

Loading never unpickles and never imports or runs anything named by the checkpoint: JSON is parsed,
the type is looked up in a fixed table, tensors come from safetensors. A LeRobot checkpoint
(`pretrained_model/` of `lerobot-train`: config.json without `lerobot_ros`, weights under `model.*`,
statistics in the normaliser processor files or, for LeRobot < 0.4, as buffers in model.safetensors)
loads too, for ACT.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lerobot_training.errors import CheckpointError, TrainingError
from lerobot_training.normalize import buffer_name
from lerobot_training.policies.base import Policy
from lerobot_training.policies.config import LEROBOT_RUNTIME_FIELDS
from lerobot_training.policies.registry import policy_class

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
CONTRACT_NAME = "contract.yaml"
CONFIG_VERSION = 1
FORMAT_KEY = "lerobot_ros"

# LeRobot config fields that only concern its optimiser/scheduler/data loading.
LEROBOT_TRAINING_FIELDS = frozenset(
    {"drop_n_last_frames", "optimizer_betas", "optimizer_eps", "scheduler_name", "scheduler_warmup_steps"}
)
_LEGACY_NORMALIZER_PREFIXES = ("normalize_inputs.", "normalize_targets.", "unnormalize_outputs.")


@dataclass
class LoadedPolicy:
    """A policy read from a checkpoint directory, with what the checkpoint says about how to run it."""

    policy: Policy
    directory: Path
    source: str  # "lerobot_ros" or "lerobot"
    fps: float | None
    contract: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def save_policy(
    directory: Path,
    policy: Policy,
    *,
    fps: float,
    contract: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write `policy` as a checkpoint directory (created if needed); returns the directory."""
    from safetensors.torch import save as save_safetensors

    directory.mkdir(parents=True, exist_ok=True)
    config = policy.config
    meta: dict[str, Any] = {
        "config_version": CONFIG_VERSION,
        "fps": fps,
        "chunk_length": config.chunk_length,
        "n_action_steps": config.executed_steps,
        "normalization": {key: mode.value for key, mode in config.normalization_modes().items()},
        "contract": CONTRACT_NAME if contract is not None else None,
    }
    if extra:
        meta.update(extra)
    document = {**config.to_dict(), FORMAT_KEY: meta}
    tensors = {key: value.detach().to("cpu").contiguous().clone() for key, value in policy.state_dict().items()}
    write_atomic(directory / WEIGHTS_NAME, save_safetensors(tensors, metadata={"format": "pt"}))
    if contract is not None:
        import yaml

        write_atomic(directory / CONTRACT_NAME, yaml.safe_dump(dict(contract), sort_keys=False).encode())
    write_atomic(directory / CONFIG_NAME, (json.dumps(document, indent=2) + "\n").encode())
    return directory


def read_safetensors(path: Path) -> dict[str, Tensor]:
    """All tensors of a safetensors file; CheckpointError when it is missing or corrupt."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise CheckpointError(f"{path} is missing; a checkpoint directory needs {path.name}")
    try:
        return dict(load_file(str(path)))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path} is not a valid safetensors file ({err}); re-export or re-download it") from None


def _read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_NAME
    if not directory.is_dir():
        raise CheckpointError(f"checkpoint directory {directory} does not exist")
    if not path.is_file():
        raise CheckpointError(f"{directory} holds no {CONFIG_NAME}; is it a checkpoint directory (pretrained_model/)?")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return data


def _load_weights(policy: Policy, tensors: Mapping[str, Tensor], path: Path) -> None:
    """Strict load with errors that name the tensors (LeRobot's own loader is not strict)."""
    own = policy.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{path} does not match the config: missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}"
        )
    for key, value in tensors.items():
        if tuple(value.shape) != tuple(own[key].shape):
            raise CheckpointError(
                f"{path}: tensor {key!r} has shape {tuple(value.shape)}, the config needs {tuple(own[key].shape)}"
            )
    policy.load_state_dict(dict(tensors), strict=True)


def load_policy(directory: Path, *, device: str | torch.device = "cpu", fps: float | None = None) -> LoadedPolicy:
    """Load a checkpoint directory written by `save_policy` or by LeRobot (ACT). `fps` overrides the stored rate."""
    directory = Path(directory)
    data = _read_config(directory)
    where = str(directory / CONFIG_NAME)
    cls = policy_class(data.get("type"), where)
    meta = data.pop(FORMAT_KEY, None)
    try:
        loaded = _load_own(directory, data, meta, cls) if meta is not None else _load_lerobot(directory, data, cls)
    except TrainingError as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{where}: {err}") from None
    if fps is not None:
        loaded.fps = fps
    loaded.policy.to(device)
    loaded.policy.eval()
    return loaded


def _load_own(directory: Path, data: dict[str, Any], meta: Any, cls: type[Policy]) -> LoadedPolicy:
    where = directory / CONFIG_NAME
    if not isinstance(meta, dict):
        raise CheckpointError(f"{where}: '{FORMAT_KEY}' must be an object")
    version = meta.get("config_version")
    if not isinstance(version, int):
        raise CheckpointError(f"{where}: '{FORMAT_KEY}.config_version' must be an integer, got {version!r}")
    if version > CONFIG_VERSION:
        raise CheckpointError(
            f"{where}: config_version {version} is newer than this lerobot_training understands ({CONFIG_VERSION}); "
            "upgrade the package"
        )
    config = cls.config_class.from_dict(data)
    policy = cls(config)
    _load_weights(policy, read_safetensors(directory / WEIGHTS_NAME), directory / WEIGHTS_NAME)
    contract = None
    contract_name = meta.get("contract")
    if contract_name:
        contract_path = directory / str(contract_name)
        if not contract_path.is_file() or contract_path.parent.resolve() != directory.resolve():
            raise CheckpointError(f"{where} names contract {contract_name!r}, which is not a file in the directory")
        import yaml

        try:
            contract = yaml.safe_load(contract_path.read_text())
        except yaml.YAMLError as err:
            raise CheckpointError(f"{contract_path} is not valid YAML: {err}") from None
    fps = meta.get("fps")
    return LoadedPolicy(policy, directory, "lerobot_ros", float(fps) if fps else None, contract, dict(meta))


def _feature_of_stat_key(key: str, features: list[str]) -> tuple[str, str] | None:
    """Split `observation.images.front.mean` into feature and stat, by the longest known feature prefix."""
    for feature in sorted(features, key=len, reverse=True):
        if key.startswith(feature + "."):
            return feature, key[len(feature) + 1 :]
    return None


def _lerobot_stats(directory: Path, tensors: Mapping[str, Tensor], features: list[str]) -> dict[str, dict[str, Tensor]]:
    stats: dict[str, dict[str, Tensor]] = {}
    by_buffer = {buffer_name(key): key for key in features}
    for key, value in tensors.items():  # LeRobot < 0.4: buffers inside model.safetensors
        if key.startswith(_LEGACY_NORMALIZER_PREFIXES):
            _, buffer, stat = key.split(".", 2)
            if buffer in by_buffer:
                stats.setdefault(by_buffer[buffer], {})[stat] = value
    processor_files = sorted(directory.glob("policy_preprocessor_step_*_normalizer_processor.safetensors")) + sorted(
        directory.glob("policy_postprocessor_step_*_unnormalizer_processor.safetensors")
    )
    for path in processor_files:  # LeRobot >= 0.4: `<feature>.<stat>` in the processor state files
        for key, value in read_safetensors(path).items():
            split = _feature_of_stat_key(key, features)
            if split is not None:
                stats.setdefault(split[0], {})[split[1]] = value
    return stats


def _load_lerobot(directory: Path, data: dict[str, Any], cls: type[Policy]) -> LoadedPolicy:
    if cls.name != "act":
        raise CheckpointError(
            f"{directory}: LeRobot checkpoints of type {cls.name!r} are not supported (only 'act'); retrain it here"
        )
    config_data = {**data, "pretrained_backbone_weights": None}  # the weights are in the checkpoint
    config = cls.config_class.from_dict(config_data, ignore=LEROBOT_RUNTIME_FIELDS | LEROBOT_TRAINING_FIELDS)
    policy = cls(config)
    weights_path = directory / WEIGHTS_NAME
    tensors = read_safetensors(weights_path)
    features = list({**config.input_features, **config.output_features})
    stats = _lerobot_stats(directory, tensors, features)
    policy.normalizer.load_stats(stats)
    normalizer_state = {f"normalizer.{k}": v for k, v in policy.normalizer.state_dict().items()}
    weights = {k: v for k, v in tensors.items() if k.startswith("model.")}
    _load_weights(policy, {**weights, **normalizer_state}, weights_path)
    return LoadedPolicy(policy, directory, "lerobot", None, None, {"lerobot_config": data})
