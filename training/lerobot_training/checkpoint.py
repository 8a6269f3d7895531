"""The checkpoint directory: one layout that LeRobot's `from_pretrained` and this package both load.

Layout written by `save_policy` (LeRobot 0.4.x's `pretrained_model/` plus two files of ours):

* `config.json`: the policy config exactly as LeRobot's `PreTrainedConfig` reads it (`type`,
  `input_features`/`output_features` with type and shape, `normalization_mapping`, the policy's fields).
* `model.safetensors`: the network's weights under LeRobot's tensor names; no statistics.
* `policy_preprocessor.json` + `policy_preprocessor_step_3_normalizer_processor.safetensors` and
  `policy_postprocessor.json` + `policy_postprocessor_step_0_unnormalizer_processor.safetensors`: LeRobot's
  processor pipelines with the normalisation statistics (`<feature>.<stat>` tensors), what
  `make_pre_post_processors(config, pretrained_path=...)`, lerobot-record and lerobot-eval load.
* `lerobot_ros.json`: what LeRobot has no field for: `config_version`, `fps`, `chunk_length`,
  `n_action_steps`, the normalisation mode of every feature, the element names of every feature (which
  joint each number is), the contract file name, `relative_actions` when the policy predicts actions
  relative to the observation's state (which joints, from which state elements; see relative_actions.py),
  and the training run's own metadata.
* `contract.yaml`: the robot contract the dataset was recorded with (when the dataset carried one).

A LeRobot checkpoint is the same directory without our two files: it loads too (ACT and diffusion), and
so do the checkpoints of earlier versions of this package (config_version 1: our metadata inside
config.json, the statistics as `normalizer.*` buffers in model.safetensors).

Loading never unpickles and never imports or runs anything named by the checkpoint: JSON is parsed,
the type is looked up in a fixed table, tensors come from safetensors.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lerobot_training.errors import CheckpointError, TrainingError
from lerobot_training.features import FeatureType, features_to_json
from lerobot_training.normalize import EPS, buffer_name
from lerobot_training.policies.base import Policy
from lerobot_training.policies.config import LEROBOT_RUNTIME_FIELDS, PolicyConfig
from lerobot_training.policies.registry import policy_class
from lerobot_training.relative_actions import METADATA_KEY as RELATIVE_ACTIONS_KEY
from lerobot_training.relative_actions import RelativeActions

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
CONTRACT_NAME = "contract.yaml"
METADATA_NAME = "lerobot_ros.json"
PREPROCESSOR_NAME = "policy_preprocessor.json"
POSTPROCESSOR_NAME = "policy_postprocessor.json"
NORMALIZER_STATE_NAME = "policy_preprocessor_step_3_normalizer_processor.safetensors"
UNNORMALIZER_STATE_NAME = "policy_postprocessor_step_0_unnormalizer_processor.safetensors"
# With relative actions the preprocessor has one more step before the normaliser (LeRobot >= 0.5's order).
RELATIVE_NORMALIZER_STATE_NAME = "policy_preprocessor_step_4_normalizer_processor.safetensors"
CONFIG_VERSION = 2
FORMAT_KEY = "lerobot_ros"  # config_version 1 kept our metadata under this key of config.json
MAX_CAMERA_SIDE = 4096
"""Largest camera height or width a checkpoint may declare (a 4K camera fits): the policy is built for, and every
picture resized to, the declared size, so a config.json saying 100000x100000 would allocate tens of GB."""

# LeRobot config fields that only concern its optimiser/scheduler/data loading/compilation (gradient_checkpointing:
# LeRobot 0.6's diffusion recomputes its UNet blocks in the backward pass).
LEROBOT_TRAINING_FIELDS = frozenset(
    {
        "drop_n_last_frames",
        "gradient_checkpointing",
        "optimizer_betas",
        "optimizer_eps",
        "scheduler_name",
        "scheduler_warmup_steps",
        "compile_model",
        "compile_mode",
    }
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


def _json_bytes(document: Any, indent: int = 2) -> bytes:
    return (json.dumps(document, indent=indent) + "\n").encode()


def lerobot_config_dict(config: PolicyConfig) -> dict[str, Any]:
    """`config` as LeRobot's config.json: features without element names, type-level normalisation only."""
    document = config.to_dict()
    for key in ("input_features", "output_features"):
        document[key] = features_to_json(getattr(config, key), names=False)
    types = {t.value for t in FeatureType}
    document["normalization_mapping"] = {
        key: mode.value for key, mode in config.normalization_mapping.items() if key in types
    }
    return document


def _processor_document(name: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "steps": steps}


def _normalizer_step(registry_name: str, config: PolicyConfig, keys: list[str], state_file: str) -> dict[str, Any]:
    features = {**config.input_features, **config.output_features}
    types = {t.value for t in FeatureType}
    return {
        "registry_name": registry_name,
        "config": {
            "eps": EPS,
            "features": {key: features[key].to_json(names=False) for key in keys},
            "norm_map": {key: mode.value for key, mode in config.normalization_mapping.items() if key in types},
        },
        "state_file": state_file,
    }


def _device_step() -> dict[str, Any]:
    return {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}}


def _relative_steps(policy: Policy) -> tuple[dict[str, Any], dict[str, Any]]:
    """The processor steps of a relative-action policy, for LeRobot: its `relative_actions_processor` and
    `absolute_actions_processor` (LeRobot >= 0.5, which subtracts/adds state[i] on the action elements whose
    names contain none of `exclude_joints`). LeRobot 0.4.x has neither and refuses to load the processors,
    rather than run offsets as absolute targets. When LeRobot's rule would choose other elements than ours
    (state and action in another order, a name inside another), the steps get names no LeRobot knows."""
    relative = policy.relative_actions
    assert relative is not None
    names = list(policy.config.action_feature.names or ())
    exclude = [name for i, name in enumerate(names) if i not in relative.action_indices]
    lerobot_mask = [not any(token.lower() in name.lower() for token in exclude) for name in names]
    ours = [i in relative.action_indices for i in range(len(names))]
    same = lerobot_mask == ours and relative.action_indices == relative.state_indices and bool(names)
    prefix = "" if same else "lerobot_ros_"
    pre = {
        "registry_name": f"{prefix}relative_actions_processor",
        "config": {"enabled": True, "exclude_joints": exclude, "action_names": names},
    }
    return pre, {"registry_name": f"{prefix}absolute_actions_processor", "config": {"enabled": True}}


def write_processors(directory: Path, policy: Policy) -> None:
    """LeRobot's pre/post-processor files (normalise inputs, de-normalise actions) with the policy's statistics.

    A relative-action policy gets LeRobot's relative/absolute action steps around them (`_relative_steps`).
    """
    from safetensors.torch import save as save_safetensors

    config = policy.config
    stats = {
        f"{key}.{stat}": value.detach().to("cpu").float().contiguous()
        for key, feature_stats in policy.normalizer.stats_dict().items()
        for stat, value in feature_stats.items()
    }
    state = save_safetensors(stats, metadata={"format": "pt"})
    relative = _relative_steps(policy) if policy.relative_actions is not None else None
    normalizer_state = NORMALIZER_STATE_NAME if relative is None else RELATIVE_NORMALIZER_STATE_NAME
    write_atomic(directory / normalizer_state, state)
    write_atomic(directory / UNNORMALIZER_STATE_NAME, state)
    inputs = [*config.input_features, *config.output_features]
    pre_steps = [
        {"registry_name": "rename_observations_processor", "config": {"rename_map": {}}},
        {"registry_name": "to_batch_processor", "config": {}},
        *([relative[0]] if relative is not None else []),
        _device_step(),
        _normalizer_step("normalizer_processor", config, inputs, normalizer_state),
    ]
    post_steps = [
        _normalizer_step("unnormalizer_processor", config, list(config.output_features), UNNORMALIZER_STATE_NAME),
        *([relative[1]] if relative is not None else []),
        _device_step(),
    ]
    preprocessor = _processor_document("policy_preprocessor", pre_steps)
    postprocessor = _processor_document("policy_postprocessor", post_steps)
    write_atomic(directory / PREPROCESSOR_NAME, _json_bytes(preprocessor))
    write_atomic(directory / POSTPROCESSOR_NAME, _json_bytes(postprocessor))


def save_policy(
    directory: Path,
    policy: Policy,
    *,
    fps: float,
    contract: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write `policy` as a checkpoint directory (created if needed); returns the directory.

    config.json is written last, so a directory with a config.json holds a complete checkpoint.
    """
    from safetensors.torch import save as save_safetensors

    directory.mkdir(parents=True, exist_ok=True)
    config = policy.config
    features = {**config.input_features, **config.output_features}
    meta: dict[str, Any] = {
        "config_version": CONFIG_VERSION,
        "fps": fps,
        "chunk_length": config.chunk_length,
        "n_action_steps": config.executed_steps,
        "normalization": {key: mode.value for key, mode in config.normalization_modes().items()},
        "feature_names": {key: list(ft.names) for key, ft in features.items() if ft.names is not None},
        "contract": CONTRACT_NAME if contract is not None else None,
    }
    if policy.relative_actions is not None:
        meta[RELATIVE_ACTIONS_KEY] = policy.relative_actions.to_json()
    if extra:
        meta.update(extra)
    tensors = {
        policy.lerobot_key(key): value.detach().to("cpu").contiguous().clone()
        for key, value in policy.state_dict().items()
        if not key.startswith("normalizer.")
    }
    write_atomic(directory / WEIGHTS_NAME, save_safetensors(tensors, metadata={"format": "pt"}))
    write_processors(directory, policy)
    if contract is not None:
        import yaml

        write_atomic(directory / CONTRACT_NAME, yaml.safe_dump(dict(contract), sort_keys=False).encode())
    write_atomic(directory / METADATA_NAME, _json_bytes(meta))
    write_atomic(directory / CONFIG_NAME, _json_bytes(lerobot_config_dict(config), indent=4))
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


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return data


def _read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_NAME
    if not directory.is_dir():
        raise CheckpointError(f"checkpoint directory {directory} does not exist")
    if not path.is_file():
        raise CheckpointError(f"{directory} holds no {CONFIG_NAME}; is it a checkpoint directory (pretrained_model/)?")
    return _read_json_object(path)


def read_metadata(directory: Path) -> dict[str, Any]:
    """Our metadata of a checkpoint: lerobot_ros.json (config.json's `lerobot_ros` in version 1); {} for LeRobot's."""
    directory = Path(directory)
    if (directory / METADATA_NAME).is_file():
        return _read_json_object(directory / METADATA_NAME)
    if (directory / CONFIG_NAME).is_file():
        legacy = _read_json_object(directory / CONFIG_NAME).get(FORMAT_KEY)
        if isinstance(legacy, dict):
            return legacy
    return {}


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
    """Load a checkpoint directory written by `save_policy` or by LeRobot (ACT, diffusion).

    `fps` overrides the stored rate.
    """
    directory = Path(directory)
    data = _read_config(directory)
    where = str(directory / CONFIG_NAME)
    cls = policy_class(data.get("type"), where)
    legacy_meta = data.pop(FORMAT_KEY, None)
    try:
        if legacy_meta is not None:
            loaded = _load_version_1(directory, data, legacy_meta, cls)
        elif (directory / METADATA_NAME).is_file():
            loaded = _load_own(directory, data, cls)
        else:
            loaded = _load_lerobot(directory, data, cls)
    except TrainingError as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{where}: {err}") from None
    if fps is not None:
        loaded.fps = fps
    loaded.policy.to(device)
    loaded.policy.eval()
    return loaded


def _check_version(meta: Any, where: Path, name: str) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise CheckpointError(f"{where}: '{name}' must be an object")
    version = meta.get("config_version")
    if not isinstance(version, int):
        raise CheckpointError(f"{where}: '{name}.config_version' must be an integer, got {version!r}")
    if version > CONFIG_VERSION:
        raise CheckpointError(
            f"{where}: config_version {version} is newer than this lerobot_training understands ({CONFIG_VERSION}); "
            "upgrade the package"
        )
    return meta


def _read_contract(directory: Path, meta: Mapping[str, Any], where: Path) -> dict[str, Any] | None:
    contract_name = meta.get("contract")
    if not contract_name:
        return None
    contract_path = directory / str(contract_name)
    if not contract_path.is_file() or contract_path.parent.resolve() != directory.resolve():
        raise CheckpointError(f"{where} names contract {contract_name!r}, which is not a file in the directory")
    import yaml

    from lerobot_ros.bounded_yaml import load_yaml

    try:
        contract = load_yaml(contract_path.read_text())
    except yaml.YAMLError as err:
        raise CheckpointError(f"{contract_path} is not valid YAML: {err}") from None
    return contract if isinstance(contract, dict) else None


def _with_feature_names(config: PolicyConfig, names: Any, where: Path) -> None:
    if names is None:
        return
    if not isinstance(names, Mapping):
        raise CheckpointError(f"{where}: 'feature_names' must be an object of lists")
    for attr in ("input_features", "output_features"):
        features = dict(getattr(config, attr))
        for key, feature in features.items():
            value = names.get(key)
            if value is None:
                continue
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                raise CheckpointError(f"{where}: feature_names[{key!r}] must be a list of strings")
            features[key] = dataclasses.replace(feature, names=tuple(value))
        setattr(config, attr, features)


def _load_version_1(directory: Path, data: dict[str, Any], meta: Any, cls: type[Policy]) -> LoadedPolicy:
    """A checkpoint of config_version 1: metadata in config.json, statistics as buffers in model.safetensors."""
    where = directory / CONFIG_NAME
    meta = _check_version(meta, where, FORMAT_KEY)
    config = cls.config_class.from_dict(data)
    policy = cls(config)
    tensors = {policy.own_key(key): value for key, value in read_safetensors(directory / WEIGHTS_NAME).items()}
    _load_weights(policy, tensors, directory / WEIGHTS_NAME)
    fps = meta.get("fps")
    contract = _read_contract(directory, meta, where)
    return LoadedPolicy(policy, directory, "lerobot_ros", float(fps) if fps else None, contract, dict(meta))


def _load_own(directory: Path, data: dict[str, Any], cls: type[Policy]) -> LoadedPolicy:
    where = directory / METADATA_NAME
    meta = _check_version(_read_json_object(where), where, METADATA_NAME)
    loaded = _load_lerobot(directory, data, cls, feature_names=meta.get("feature_names"), meta_path=where)
    relative = meta.get(RELATIVE_ACTIONS_KEY)
    if relative is not None:
        loaded.policy.relative_actions = RelativeActions.from_json(relative, str(where))
        action_dim = int(loaded.policy.config.action_feature.shape[0])
        if loaded.policy.relative_actions.action_dim != action_dim:
            raise CheckpointError(
                f"{where}: {RELATIVE_ACTIONS_KEY!r} is for {loaded.policy.relative_actions.action_dim} action "
                f"elements, the policy has {action_dim}"
            )
        if loaded.policy.relative_actions.state_key not in loaded.policy.config.input_features:
            raise CheckpointError(
                f"{where}: the policy predicts actions relative to {loaded.policy.relative_actions.state_key!r}, "
                "which is not among its inputs"
            )
    fps = meta.get("fps")
    contract = _read_contract(directory, meta, where)
    return LoadedPolicy(loaded.policy, directory, "lerobot_ros", float(fps) if fps else None, contract, dict(meta))


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


def _lerobot_config(cls: type[Policy], data: dict[str, Any], where: Path) -> PolicyConfig:
    """Our config of a LeRobot config.json; LeRobot fields we do not implement are refused when not at defaults."""
    data = dict(data)
    unsupported = {"resize_shape": None, "crop_ratio": 1.0}
    for name, default in unsupported.items():
        if name in data:
            value = data.pop(name)
            if value != default:
                raise CheckpointError(
                    f"{where}: {name}={value!r} is not supported by this version (only {default!r}); "
                    "run the checkpoint with LeRobot itself, or retrain without it"
                )
    data["pretrained_backbone_weights"] = None  # the weights are in the checkpoint
    return cls.config_class.from_dict(data, ignore=LEROBOT_RUNTIME_FIELDS | LEROBOT_TRAINING_FIELDS)


def check_camera_sizes(features: Mapping[str, Any], where: Path | str) -> None:
    """Refuse a checkpoint whose camera inputs (``{"type": "VISUAL", "shape": [C, H, W]}`` entries of config.json,
    or `PolicyFeature`s) declare more than `MAX_CAMERA_SIDE` pixels a side, before anything is sized from them."""
    for key, feature in features.items():
        kind = feature.get("type") if isinstance(feature, Mapping) else getattr(feature, "type", None)
        if kind not in (FeatureType.VISUAL, FeatureType.VISUAL.value):
            continue
        shape = feature.get("shape") if isinstance(feature, Mapping) else getattr(feature, "shape", None)
        sides = list(shape)[1:] if isinstance(shape, (list, tuple)) and len(shape) == 3 else None
        if sides is None or not all(isinstance(n, int) and 0 < n <= MAX_CAMERA_SIDE for n in sides):
            raise CheckpointError(
                f"{where}: camera input {key!r} declares shape {str(shape)[:60]}, not (3, height, width) with sides "
                f"of 1..{MAX_CAMERA_SIDE} pixels; the checkpoint's config.json is damaged or was edited: restore it "
                "(or train again)"
            )


def _load_lerobot(
    directory: Path,
    data: dict[str, Any],
    cls: type[Policy],
    *,
    feature_names: Any = None,
    meta_path: Path | None = None,
) -> LoadedPolicy:
    check_camera_sizes(data.get("input_features") or {}, directory / CONFIG_NAME)
    config = _lerobot_config(cls, data, directory / CONFIG_NAME)
    _with_feature_names(config, feature_names, meta_path or directory / CONFIG_NAME)
    policy = cls(config)
    weights_path = directory / WEIGHTS_NAME
    tensors = read_safetensors(weights_path)
    features = list({**config.input_features, **config.output_features})
    stats = _lerobot_stats(directory, tensors, features)
    policy.normalizer.load_stats(stats)
    normalizer_state = {f"normalizer.{k}": v for k, v in policy.normalizer.state_dict().items()}
    weights = {
        policy.own_key(k): v
        for k, v in tensors.items()
        if not k.startswith(_LEGACY_NORMALIZER_PREFIXES) and not k.startswith("normalizer.")
    }
    _load_weights(policy, {**weights, **normalizer_state}, weights_path)
    return LoadedPolicy(policy, directory, "lerobot", None, None, {"lerobot_config": data})
