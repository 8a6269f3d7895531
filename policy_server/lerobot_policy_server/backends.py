"""Loading a checkpoint into something the server can serve (torch and LeRobot are imported here, on load).

* ``lerobot``: any policy type the environment's LeRobot knows, through LeRobot's own
  `get_policy_class(type).from_pretrained` and `make_pre_post_processors(config, pretrained_path=...)`;
  observations are prepared the way `lerobot-record` prepares them (`prepare_observation_for_inference`:
  images uint8 (H, W, 3) -> float (3, H, W) in [0, 1], a batch of one, ``task`` and ``robot_type``), and the
  chunk is `predict_action_chunk` through the postprocessor.
* ``lerobot_training``: this project's ACT / diffusion (and LeRobot's checkpoints of those types), when
  `lerobot_training` is importable.

``auto`` takes LeRobot when it is importable, else lerobot_training.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_policy_server.protocol import FeatureSpec, PolicyInfo
from lerobot_policy_server.service import ObservationError, ServedPolicy

BACKENDS = ("auto", "lerobot", "lerobot_training")
# LeRobot policies whose predict_action_chunk reads observation queues that only select_action fills.
QUEUED_TYPES = ("diffusion", "vqbet")
# Ours: the project's metadata beside a LeRobot-clean checkpoint.
METADATA_NAME = "lerobot_ros.json"
CONTRACT_NAME = "contract.yaml"


class LoadError(Exception):
    """A checkpoint cannot be served here; the message is one line naming what and how to fix it."""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def read_policy_type(directory: Path) -> str:
    path = directory / "config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise LoadError(f"{path}: cannot read the checkpoint's config ({err})") from None
    policy_type = data.get("type") if isinstance(data, dict) else None
    if not isinstance(policy_type, str):
        raise LoadError(f"{path}: no policy 'type'")
    return policy_type


def _project_metadata(directory: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """lerobot_ros.json (fps, feature names) and the content of contract.yaml of one of our checkpoints; empty /
    None otherwise (LoadError for a contract.yaml that is not a YAML mapping)."""
    meta: dict[str, Any] = {}
    if (directory / METADATA_NAME).is_file():
        try:
            loaded = json.loads((directory / METADATA_NAME).read_text())
            meta = loaded if isinstance(loaded, dict) else {}
        except (OSError, json.JSONDecodeError):
            meta = {}
    path = directory / CONTRACT_NAME
    if not path.is_file():
        return meta, None
    try:
        import yaml

        from lerobot_ros.bounded_yaml import load_yaml  # the project's YAML loader, aliases bounded

        contract = load_yaml(path.read_text())
    except ImportError:
        return meta, None  # the contract is an extra: without PyYAML and lerobot_ros the client gives its own
    except (OSError, yaml.YAMLError) as err:
        raise LoadError(f"{path}: cannot read the checkpoint's contract ({' '.join(str(err).split())})") from None
    if not isinstance(contract, dict):
        raise LoadError(f"{path}: the checkpoint's contract is not a YAML mapping")
    return meta, contract


MAX_CAMERA_SIDE = 4096
"""Largest camera height or width a served checkpoint may declare (lerobot_training's limit too): LeRobot builds the
policy for, and the server sizes every picture to, what config.json declares."""


def _check_camera_sizes(directory: Path) -> None:
    """LoadError for a config.json whose camera inputs declare more than MAX_CAMERA_SIDE pixels a side, before
    LeRobot builds anything of that size (a config.json saying 100000x100000 would allocate tens of GB)."""
    try:
        features = json.loads((directory / "config.json").read_text()).get("input_features") or {}
    except (OSError, ValueError, AttributeError):
        return  # LeRobot's own load reports an unreadable config.json
    for key, feature in features.items() if isinstance(features, dict) else ():
        if not isinstance(feature, dict) or feature.get("type") != "VISUAL":
            continue
        shape = feature.get("shape")
        sides = shape[1:] if isinstance(shape, list) and len(shape) == 3 else None
        if sides is None or not all(isinstance(n, int) and 0 < n <= MAX_CAMERA_SIDE for n in sides):
            raise LoadError(
                f"{directory / 'config.json'}: camera input {key!r} declares shape {str(shape)[:60]}, not "
                f"(3, height, width) with sides of 1..{MAX_CAMERA_SIDE} pixels; the checkpoint's config.json is "
                "damaged or was edited: restore it (or train again)"
            )


def _action_names(meta: Mapping[str, Any]) -> tuple[str, ...]:
    names = meta.get("feature_names", {})
    action = names.get("action") if isinstance(names, dict) else None
    return tuple(str(n) for n in action) if isinstance(action, list) else ()


def _fps(meta: Mapping[str, Any]) -> float | None:
    fps = meta.get("fps")
    return float(fps) if isinstance(fps, (int, float)) and not isinstance(fps, bool) and fps > 0 else None


def _inputs(features: Mapping[str, Any], visual_type: Any) -> tuple[FeatureSpec, ...]:
    specs = []
    for key, feature in features.items():
        shape = tuple(int(n) for n in feature.shape)
        if feature.type is visual_type:
            specs.append(FeatureSpec(key, (shape[1], shape[2], shape[0]), "uint8", True))
        else:
            specs.append(FeatureSpec(key, shape, "float32", False))
    return tuple(specs)


def _check_optional_packages(policy_class: type) -> None:
    """ImportError naming the package a LeRobot policy's module imported without.

    Some of LeRobot's policy modules (pi0, pi05) import their heavy dependencies only when
    `lerobot.utils.import_utils` found them (``_transformers_available`` and the like) and fail later, inside the
    constructor, with an unrelated TypeError; SmolVLA's module imports transformers outright and raises
    ImportError at once. This makes the first kind fail the same way as the second.
    """
    module = sys.modules.get(policy_class.__module__)
    for name, value in sorted(vars(module).items() if module is not None else ()):
        if name.startswith("_") and name.endswith("_available") and value is False:
            package = name[1 : -len("_available")]
            raise ImportError(f"No module named {package!r}")


class LeRobotBackend:
    """A checkpoint run by LeRobot's own classes and processors (see the module docstring)."""

    def __init__(self, directory: Path, device: str = "cpu", seed: int | None = None, robot_type: str = "") -> None:
        policy_type = read_policy_type(directory)
        _check_camera_sizes(directory)
        try:
            import torch
            from lerobot.configs.policies import PreTrainedConfig
            from lerobot.configs.types import FeatureType
            from lerobot.policies.factory import get_policy_class, make_pre_post_processors
            from lerobot.policies.utils import prepare_observation_for_inference
        except ImportError as err:
            raise LoadError(f"the lerobot backend needs LeRobot in this environment ({err})") from None
        version = _version("lerobot")
        try:
            cls = get_policy_class(policy_type)
            _check_optional_packages(cls)
        except (ValueError, NotImplementedError, ImportError) as err:
            raise LoadError(
                f"policy type {policy_type!r} ({directory}) is not available in LeRobot {version} here: "
                f"{' '.join(str(err).split())}; run the server in an environment whose LeRobot has it "
                "(SmolVLA / pi0 / pi05: lerobot>=0.5 with its extras, Python 3.12)"
            ) from None
        try:
            config = PreTrainedConfig.from_pretrained(directory)
            config.device = device
            policy = cls.from_pretrained(directory, config=config)
            policy.eval()
            preprocessor, postprocessor = make_pre_post_processors(
                policy.config,
                pretrained_path=str(directory),
                preprocessor_overrides={"device_processor": {"device": device}},
            )
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as err:
            raise LoadError(f"LeRobot {version} cannot load {directory}: {type(err).__name__}: {err}") from None
        self._torch = torch
        self._prepare = prepare_observation_for_inference
        self._policy = policy
        self._pre = preprocessor
        self._post = postprocessor
        self._device = torch.device(device)
        self._seed = seed
        self._robot_type = robot_type
        self.policy_type = policy_type
        config = policy.config
        meta, contract = _project_metadata(directory)
        steps = getattr(config, "n_action_steps", 1)
        horizon = int(steps if policy_type in QUEUED_TYPES else getattr(config, "chunk_size", steps))
        action = config.output_features.get("action")
        tokenizes = any("token" in type(step).__name__.lower() for step in getattr(preprocessor, "steps", []))
        self.info = PolicyInfo(
            policy_type=policy_type,
            name=directory.name,
            backend="lerobot",
            device=device,
            inputs=_inputs(config.input_features, FeatureType.VISUAL),
            action_dim=int(action.shape[0]) if action is not None else 0,
            horizon=horizon,
            action_names=_action_names(meta),
            fps=_fps(meta),
            language=tokenizes,
            contract=contract,
            versions={"lerobot": version, "torch": _version("torch"), "server": _version("lerobot-policy-server")},
        )

    def reset(self) -> None:
        self._policy.reset()
        self._pre.reset()
        self._post.reset()

    def predict(self, observation: Mapping[str, npt.NDArray[Any]], task: str) -> npt.NDArray[Any]:
        torch = self._torch
        values = {spec.key: np.array(observation[spec.key]) for spec in self.info.inputs}  # writable copies
        with torch.inference_mode():
            batch = self._prepare(values, self._device, task, self._robot_type)
            batch = {key: value for key, value in self._pre(batch).items() if value is not None}
            if self.policy_type in QUEUED_TYPES:
                from lerobot.policies.utils import populate_queues
                from lerobot.utils.constants import OBS_IMAGES

                if self._policy.config.image_features:
                    images = [batch[key] for key in self._policy.config.image_features]
                    batch[OBS_IMAGES] = torch.stack(images, dim=-4)
                self._policy._queues = populate_queues(self._policy._queues, batch)
            if self._seed is not None:
                torch.manual_seed(self._seed)
            chunk = self._post(self._policy.predict_action_chunk(batch))
        return np.asarray(chunk[0].detach().to("cpu").float().numpy())


class TrainingBackend:
    """A checkpoint run by this project's `lerobot_training` (ACT, diffusion)."""

    def __init__(self, directory: Path, device: str = "cpu", seed: int | None = None) -> None:
        try:
            import torch

            from lerobot_training.checkpoint import load_policy
            from lerobot_training.errors import TrainingError
            from lerobot_training.features import FeatureType
        except ImportError as err:
            raise LoadError(f"the lerobot_training backend needs lerobot_training and torch ({err})") from None
        try:
            loaded = load_policy(directory, device=device)
        except (TrainingError, RuntimeError, OSError) as err:
            raise LoadError(
                f"{' '.join(str(err).split())}; serve it from an environment with LeRobot (--backend lerobot)"
            ) from None
        self._torch = torch
        self._policy = loaded.policy
        self._seed = seed
        config = loaded.policy.config
        action = config.action_feature
        _, contract = _project_metadata(directory)
        self.info = PolicyInfo(
            policy_type=read_policy_type(directory),
            name=directory.name,
            backend="lerobot_training",
            device=device,
            inputs=_inputs(config.input_features, FeatureType.VISUAL),
            action_dim=int(action.shape[0]),
            horizon=int(config.chunk_length),
            action_names=tuple(action.names) if action.names else (),
            fps=loaded.fps,
            language=False,
            contract=contract,
            versions={"torch": _version("torch"), "server": _version("lerobot-policy-server")},
        )

    def reset(self) -> None:
        self._policy.reset()

    def predict(self, observation: Mapping[str, npt.NDArray[Any]], task: str) -> npt.NDArray[Any]:
        values = {spec.key: np.array(observation[spec.key]) for spec in self.info.inputs}
        if self._seed is not None:
            self._torch.manual_seed(self._seed)
        try:
            with self._torch.inference_mode():
                chunk = self._policy.predict_chunk(values)
        except ValueError as err:
            raise ObservationError(str(err)) from None
        return np.asarray(chunk.detach().to("cpu").numpy())


def _download(repo_id: str) -> Path:
    """A Hub repo id -> its local snapshot (huggingface_hub, which LeRobot's environment has)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise LoadError(f"{repo_id!r} looks like a Hub repo id but huggingface_hub is not installed") from None
    try:
        return Path(snapshot_download(repo_id=repo_id))
    except Exception as err:  # network, auth, missing repo: all one line for the user
        raise LoadError(f"cannot download Hub repo {repo_id!r}: {type(err).__name__}: {err}") from None


def load_backend(
    checkpoint: str, backend: str = "auto", device: str = "cpu", seed: int | None = None, robot_type: str = ""
) -> ServedPolicy:
    """Load `checkpoint` (a local directory or a Hub repo id) with `backend` (one of BACKENDS); LoadError otherwise."""
    directory = Path(checkpoint).expanduser()
    if not directory.exists() and checkpoint.count("/") == 1 and not checkpoint.startswith((".", "/", "~")):
        directory = _download(checkpoint)
    if not (directory / "config.json").is_file():
        raise LoadError(f"{checkpoint}: not a checkpoint directory (no config.json)")
    if backend not in BACKENDS:
        raise LoadError(f"backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if backend == "auto":
        backend = "lerobot" if importlib.util.find_spec("lerobot") is not None else "lerobot_training"
    served: LeRobotBackend | TrainingBackend
    if backend == "lerobot":
        served = LeRobotBackend(directory, device, seed, robot_type)
    else:
        served = TrainingBackend(directory, device, seed)
    if directory != Path(checkpoint).expanduser():  # a Hub download: named by its repo id, not its cache path
        served.info = dataclasses.replace(served.info, name=checkpoint)
    return served
