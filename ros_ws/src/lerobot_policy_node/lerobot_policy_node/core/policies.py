"""What the policy node runs: a checkpoint's policy, or the deterministic scripted policy for tests and the bench.

Both answer `predict_chunk(observation) -> (horizon, action_dim)` numpy actions in dataset units, row 0
belonging to the observation's own time. Observations are dicts keyed by feature (`observation.state` as a
vector, cameras as (H, W, 3) uint8) plus ``timestamp`` (seconds of the observation, on the node's clock).

A policy served by `lerobot_policy_server` (any LeRobot policy, on this or another host) is spelt
``grpc://HOST:PORT`` (`RemotePolicy`).

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
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from lerobot_policy_node.core.bottleneck import LinkMonitor
from lerobot_policy_node.core.errors import PolicyConfigError, PolicyLoadError, RemotePolicyError
from lerobot_policy_node.core.rtc import ChunkPrefix

SCRIPTED = "scripted"
REMOTE_SCHEME = "grpc://"
TASK_KEY = "task"
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
    # Its chunks are a function of time, so consecutive ones already agree; with a prefix the frozen steps are
    # copied (real-time chunking needs nothing else from it).
    can_inpaint: bool = True
    last_prefix: ChunkPrefix | None = field(default=None, repr=False)
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

    def predict_chunk(
        self, observation: Mapping[str, Any], prefix: ChunkPrefix | None = None
    ) -> npt.NDArray[np.float64]:
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
        self.last_prefix = prefix
        if prefix is not None:
            frozen = min(prefix.inference_delay, len(prefix.actions), self.horizon)
            chunk[:frozen] = prefix.actions[:frozen, : self.action_dim]
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
        unsupported = _unsupported_type(directory)
        if unsupported:
            raise PolicyLoadError(unsupported)
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
        relative = loaded.policy.relative_actions
        # Joints the policy predicts relative to observation.state; its predict_chunk adds the state of the
        # observation the chunk is computed from back, so chunks leave here as absolute targets.
        self.relative_joints: tuple[str, ...] = relative.joints if relative is not None else ()
        self.can_inpaint = bool(loaded.policy.supports_rtc)

    def reset(self) -> None:
        self._policy.reset()

    def predict_chunk(
        self, observation: Mapping[str, Any], prefix: ChunkPrefix | None = None
    ) -> npt.NDArray[np.float64]:
        """Actions for `observation`; with `prefix`, continuing the previous chunk (real-time chunking)."""
        values = {f.key: observation[f.key] for f in self.inputs}
        with self._torch.inference_mode():
            if prefix is None:
                chunk = self._policy.predict_chunk(values)
            else:
                from lerobot_training.policies.rtc import RtcPrefix

                guide = RtcPrefix(
                    self._torch.as_tensor(prefix.actions, dtype=self._torch.float32),
                    prefix.inference_delay,
                    prefix.execution_horizon,
                    prefix.max_guidance_weight,
                    prefix.start_noise_level,
                )
                chunk = self._policy.predict_chunk(values, guide)
        return np.asarray(chunk.detach().to("cpu").numpy(), dtype=np.float64)

    def predict_chunks(self, observations: Sequence[Mapping[str, Any]]) -> list[npt.NDArray[np.float64]]:
        """`predict_chunk` of each observation (what evaluation with several envs and the `robots` mode run): the
        training policy's `predict_chunks`; on the CPU each chunk is `predict_chunk`'s, bit for bit, whatever else
        shares the call."""
        if not observations:
            return []
        with self._torch.inference_mode():
            chunks = self._policy.predict_chunks([{f.key: o[f.key] for f in self.inputs} for o in observations])
        array = np.asarray(chunks.detach().to("cpu").numpy(), dtype=np.float64)
        return [np.asarray(array[i], dtype=np.float64) for i in range(len(observations))]


def _unsupported_type(directory: Path) -> str:
    """The one-line error for a checkpoint whose policy type only LeRobot runs (empty when it runs here)."""
    import json

    from lerobot_training.policies.registry import POLICY_CLASSES

    try:
        policy_type = json.loads((directory / "config.json").read_text()).get("type")
    except (OSError, ValueError, AttributeError):
        return ""  # load_policy reports a missing or broken config.json
    if not isinstance(policy_type, str) or policy_type in POLICY_CLASSES:
        return ""
    return (
        f"policy type {policy_type!r} of {directory} does not run in-process (this node runs "
        f"{', '.join(sorted(POLICY_CLASSES))}); serve it from LeRobot's environment with `lerobot-ros policy-server "
        f"{directory} --port 50051` (or `python -m lerobot_policy_server`) and set checkpoint:=grpc://HOST:50051"
    )


@dataclass(frozen=True)
class RemoteAccess:
    """What a policy server may ask of the node: a token file (empty: LEROBOT_POLICY_SERVER_TOKEN, if set) and TLS
    files: the CA of the server's certificate, and this node's certificate and key for mutual TLS (empty: unused)."""

    token_file: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""


class RemotePolicy:
    """A policy served by `lerobot_policy_server` at ``grpc://host:port`` behind the `ChunkPolicy` interface.

    Configuring asks the server what it serves (Info): inputs, action names and size, chunk length, fps and,
    for our checkpoints, the contract. Each chunk is one Predict call carrying the observation's stamp and
    the task text, with `timeout_s`. When the server cannot be reached, calls fail at once with a
    `RemotePolicyError` until the next attempt is due (backoff doubling from `BACKOFF_S` to `MAX_BACKOFF_S`);
    after a failure, the next answer is only used once Info shows the server still serves the same policy.
    Camera images travel as `image_encoding` (raw, jpeg of `jpeg_quality`, png; the server must decode it);
    `link` keeps each call's bytes and time on the wire.
    """

    BACKOFF_S = 0.1
    MAX_BACKOFF_S = 2.0

    def __init__(
        self,
        url: str,
        timeout_s: float = 5.0,
        name: str | None = None,
        connect_timeout_s: float = 10.0,
        image_encoding: str = "raw",
        jpeg_quality: int = 90,
        access: RemoteAccess | None = None,
    ):
        try:
            from lerobot_policy_server.client import PolicyClient, RemoteError
            from lerobot_policy_server.security import ClientSecurity
        except ImportError as err:
            raise PolicyLoadError(
                f"checkpoint {url}: the remote backend needs lerobot_policy_server and grpcio ({err}); "
                "install them (scripts/setup.sh)"
            ) from None
        try:
            access = access or RemoteAccess()
            security = ClientSecurity.from_files(access.token_file, access.tls_ca, access.tls_cert, access.tls_key)
            self._client = PolicyClient(url, timeout_s, image_encoding, jpeg_quality, security=security)
        except ValueError as err:
            raise PolicyConfigError(f"checkpoint {url}: {err}") from None
        self._remote_error = RemoteError
        self.url = url
        self.name = name or url
        try:
            info = self._client.info(timeout_s=connect_timeout_s)
            self._client.reset(timeout_s=connect_timeout_s)  # a (re)configured node starts a new episode
        except RemoteError as err:
            self._client.close()
            if err.code.value == "UNAUTHENTICATED":
                hint = "set remote_token_file to a file holding the server's token (or $LEROBOT_POLICY_SERVER_TOKEN)"
            else:
                hint = "start it with `lerobot-ros policy-server CHECKPOINT --port PORT` on that host"
            raise PolicyLoadError(f"{err}; {hint}") from None
        if image_encoding not in info.image_encodings:
            self._client.close()
            raise PolicyConfigError(
                f"image_encoding {image_encoding}: the policy server at {url} decodes only "
                f"{', '.join(info.image_encodings)}; set image_encoding:=raw or upgrade lerobot-policy-server there"
            )
        self.info = info
        self.image_encoding = image_encoding
        self.jpeg_quality = int(jpeg_quality)
        self.link = LinkMonitor()
        self.inputs: Sequence[InputFeature] = tuple(InputFeature(f.key, f.shape, f.visual) for f in info.inputs)
        self._dtypes = {f.key: np.dtype(f.dtype) for f in info.inputs}
        self.action_names = info.action_names or None
        self.action_dim = info.action_dim
        self.horizon = info.horizon
        self.fps = info.fps
        self.language = info.language
        self.contract: dict[str, Any] | None = None
        if info.contract:
            self.contract = dict(info.contract)
        self.can_inpaint = False  # the policy server's protocol carries no previous chunk
        self._lock = threading.Lock()  # the failure state is shared by the inference workers
        self._failures = 0
        self._retry_at = 0.0
        self._recheck = False
        self.last_task = ""

    def close(self) -> None:
        self._client.close()

    def reset(self) -> None:
        try:
            self._client.reset()
        except self._remote_error as err:
            raise RemotePolicyError(str(err)) from None

    def _failed(self, message: str) -> RemotePolicyError:
        with self._lock:
            self._failures += 1
            failures = self._failures
            backoff = min(self.MAX_BACKOFF_S, self.BACKOFF_S * 2 ** (failures - 1))
            self._retry_at = time.monotonic() + backoff
            self._recheck = True
        return RemotePolicyError(f"{message} (failure {failures}; next attempt in {backoff:.1f} s)")

    def _same_policy(self) -> None:
        info = self._client.info()
        if (info.inputs, info.action_dim, info.action_names) != (
            self.info.inputs,
            self.info.action_dim,
            self.info.action_names,
        ):
            raise RemotePolicyError(
                f"the policy server at {self.url} now serves a different policy ({info.policy_type} {info.name}, "
                f"{info.action_dim} actions); reconfigure the node"
            )

    def predict_chunk(self, observation: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            raise RemotePolicyError(f"policy server {self.url} unreachable; next attempt in {wait:.1f} s")
        values = {
            f.key: np.ascontiguousarray(np.asarray(observation[f.key], dtype=self._dtypes[f.key]).reshape(f.shape))
            for f in self.inputs
        }
        stamp_ns = round(float(observation[TIMESTAMP_KEY]) * 1e9)
        task = str(observation.get(TASK_KEY, ""))
        try:
            if self._recheck:
                self._same_policy()
                with self._lock:
                    self._recheck = False
            reply, transfer = self._client.predict_timed(values, stamp_ns, task)
        except self._remote_error as err:
            raise self._failed(str(err)) from None
        self.link.record(transfer.request_bytes, transfer.round_trip_s, reply.inference_time_s, transfer.encode_s)
        with self._lock:
            self._failures = 0
        self.last_task = reply.task
        return np.asarray(reply.actions, dtype=np.float64)


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
