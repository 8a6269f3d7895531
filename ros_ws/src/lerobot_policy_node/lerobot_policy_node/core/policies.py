"""What the policy node runs: a checkpoint's policy, or the deterministic scripted policy for tests and the bench.

Both answer `predict_chunk(observation) -> (horizon, action_dim)` numpy actions in dataset units, row 0
belonging to the observation's own time. Observations are dicts keyed by feature (`observation.state` as a
vector, cameras as (H, W, 3) uint8) plus ``timestamp`` (seconds of the observation, on the node's clock).

The scripted policy is spelt ``scripted`` or ``scripted:key=value,...`` wherever a checkpoint is expected:

* ``delay`` (s): injected inference time (a sleep, which like torch inference releases the GIL);
* ``horizon`` (steps), ``fps``: chunk length and step rate;
* ``amplitude`` (dataset units), ``frequency`` (Hz): each joint follows
  ``center + amplitude * (sin(2 pi f (t - t0) + phase_j) - sin(phase_j))`` where ``center`` is the first
  observed state and ``t0`` its time, so the motion starts where the robot is;
* ``fault``: ``nan`` (every chunk after the first holds a NaN), ``dim`` (one action column too many),
  ``none`` (default).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from lerobot_policy_node.core.errors import PolicyConfigError, PolicyLoadError

SCRIPTED = "scripted"
STATE_KEY = "observation.state"
TIMESTAMP_KEY = "timestamp"
FAULTS = ("none", "nan", "dim")


@dataclass(frozen=True)
class InputFeature:
    """One observation a policy needs: `visual` ones are (H, W, 3) pictures of `shape` (H, W, 3)."""

    key: str
    shape: tuple[int, ...]
    visual: bool


class ChunkPolicy(Protocol):
    """What the policy node needs from a policy."""

    name: str
    inputs: Sequence[InputFeature]
    action_names: tuple[str, ...] | None
    action_dim: int
    horizon: int
    fps: float | None

    def predict_chunk(self, observation: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        """(horizon, action_dim) actions in dataset units."""

    def reset(self) -> None:
        """Forget per-episode state."""


@dataclass
class ScriptedPolicy:
    """Deterministic policy of the module docstring (no weights)."""

    action_dim: int
    horizon: int = 30
    fps: float | None = 30.0
    delay: float = 0.0
    amplitude: float = 10.0
    frequency: float = 0.5
    fault: str = "none"
    action_names: tuple[str, ...] | None = None
    name: str = SCRIPTED
    inputs: Sequence[InputFeature] = ()
    calls: int = 0
    _center: npt.NDArray[np.float64] | None = field(default=None, repr=False)
    _t0: float = 0.0

    def __post_init__(self) -> None:
        if self.action_dim < 1 or self.horizon < 1:
            raise PolicyConfigError(f"scripted policy: action_dim and horizon must be >= 1 ({self})")
        if self.fps is None or not (math.isfinite(self.fps) and self.fps > 0):
            raise PolicyConfigError(f"scripted policy: fps must be > 0, got {self.fps}")
        if not (math.isfinite(self.delay) and self.delay >= 0):
            raise PolicyConfigError(f"scripted policy: delay must be >= 0 s, got {self.delay}")
        if self.fault not in FAULTS:
            raise PolicyConfigError(f"scripted policy: fault must be one of {FAULTS}, got {self.fault!r}")
        if not self.inputs:
            self.inputs = (InputFeature(STATE_KEY, (self.action_dim,), False),)

    def reset(self) -> None:
        self._center = None

    def predict_chunk(self, observation: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        start = time.monotonic()
        t = float(observation[TIMESTAMP_KEY])
        if self._center is None:
            self._center = np.asarray(observation[STATE_KEY], dtype=np.float64).reshape(-1)[: self.action_dim].copy()
            self._t0 = t
        assert self.fps is not None
        times = t - self._t0 + np.arange(self.horizon) / self.fps
        phases = np.linspace(0.0, math.pi, self.action_dim, endpoint=False)
        wave = np.sin(2 * math.pi * self.frequency * times[:, None] + phases[None, :]) - np.sin(phases)[None, :]
        chunk = self._center[None, :] + self.amplitude * wave
        self.calls += 1
        if self.fault == "nan" and self.calls > 1:
            chunk[self.horizon // 2, 0] = math.nan
        if self.fault == "dim":
            chunk = np.concatenate((chunk, np.zeros((self.horizon, 1))), axis=1)
        remaining = self.delay - (time.monotonic() - start)
        if remaining > 0:
            time.sleep(remaining)
        return chunk


def parse_scripted(spec: str, action_dim: int, action_names: tuple[str, ...] | None = None) -> ScriptedPolicy:
    """``scripted[:key=value,...]`` -> ScriptedPolicy (raises PolicyConfigError naming the bad key)."""
    _, _, options = spec.partition(":")
    kwargs: dict[str, Any] = {}
    numeric = {"delay": float, "horizon": int, "fps": float, "amplitude": float, "frequency": float}
    for item in filter(None, (part.strip() for part in options.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise PolicyConfigError(f"scripted policy option {item!r}: expected key=value")
        if key == "fault":
            kwargs[key] = value
        elif key in numeric:
            try:
                kwargs[key] = numeric[key](value)
            except ValueError:
                raise PolicyConfigError(f"scripted policy option {key}={value!r}: not a number") from None
        else:
            known = ", ".join([*numeric, "fault"])
            raise PolicyConfigError(f"scripted policy: unknown option {key!r}; known: {known}")
    return ScriptedPolicy(action_dim=action_dim, action_names=action_names, **kwargs)


class CheckpointPolicy:
    """A `lerobot_training` checkpoint behind the `ChunkPolicy` interface (torch is imported on load)."""

    def __init__(self, directory: Path, device: str = "cpu", name: str | None = None) -> None:
        try:
            import torch

            from lerobot_training.checkpoint import load_policy
            from lerobot_training.errors import TrainingError
            from lerobot_training.features import FeatureType
        except ImportError as err:
            raise PolicyLoadError(f"a checkpoint needs lerobot_training and torch ({err}); install them") from None
        try:
            loaded = load_policy(directory, device=device)
        except (TrainingError, RuntimeError) as err:
            raise PolicyLoadError(f"cannot load policy from {directory}: {err}") from None
        self._torch = torch
        self._loaded = loaded
        self._policy = loaded.policy
        config = loaded.policy.config
        self.name = name or str(directory)
        self.contract: dict[str, Any] | None = loaded.contract
        inputs = []
        for key, feature in config.input_features.items():
            visual = feature.type is FeatureType.VISUAL
            shape = (feature.shape[1], feature.shape[2], feature.shape[0]) if visual else tuple(feature.shape)
            inputs.append(InputFeature(key, shape, visual))
        self.inputs: Sequence[InputFeature] = tuple(inputs)
        action = config.action_feature
        self.action_names = tuple(action.names) if action.names else None
        self.action_dim = int(action.shape[0])
        self.horizon = int(config.chunk_length)
        self.fps = loaded.fps

    def reset(self) -> None:
        self._policy.reset()

    def predict_chunk(self, observation: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        values = {f.key: observation[f.key] for f in self.inputs}
        with self._torch.inference_mode():
            chunk = self._policy.predict_chunk(values)
        return np.asarray(chunk.detach().to("cpu").numpy(), dtype=np.float64)


def resolve_checkpoint(spec: str, cache_dir: str | None = None) -> Path:
    """A local checkpoint directory: `spec` itself, or the download of Hub repo `spec` (huggingface_hub)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if spec.count("/") != 1 or spec.startswith((".", "/", "~")):
        raise PolicyLoadError(f"checkpoint {spec!r} is neither a directory nor a Hub repo id (owner/name)")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:
        raise PolicyLoadError(f"{spec!r} looks like a Hub repo id but huggingface_hub is not installed") from None
    try:
        return Path(snapshot_download(repo_id=spec, cache_dir=cache_dir))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as err:
        raise PolicyLoadError(f"cannot download Hub repo {spec!r}: {err}; pass a local checkpoint directory") from None
