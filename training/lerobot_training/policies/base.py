"""The interface every policy implements, and the observation handling they share.

A policy is a plain `nn.Module` that owns its normalisation statistics:

* `compute_loss(batch)` takes a training batch (features as float tensors, cameras (B, [T,] 3, H, W) in
  [0, 1], `action` (B, T, A) and `action_is_pad` (B, T)) and returns the loss and a dict of floats to log.
* `predict_chunk(observation)` takes one observation (no batch axis; cameras as uint8 (H, W, 3) as they
  come off a ROS image, or float (3, H, W) in [0, 1]) and returns a (chunk_length, action_dim) tensor of
  actions in dataset units; row 0 belongs to the observation's own time step. A policy trained with
  relative actions (`relative_actions` set) predicts offsets, and `predict_chunk` adds the state of this
  observation back, so its result is absolute targets like any other policy's.
* `select_action(observation)` runs a LeRobot-style rollout (queue of `n_action_steps`, history of
  `n_obs_steps`), used by the simulation evaluation.
"""

from __future__ import annotations

import abc
import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from lerobot_training.errors import FeatureMismatchError, PolicyConfigError
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.normalize import Normalizer
from lerobot_training.policies.config import PolicyConfig
from lerobot_training.policies.rtc import RtcPrefix
from lerobot_training.relative_actions import RelativeActions

Batch = dict[str, Tensor]


def image_to_chw_float(value: Tensor) -> Tensor:
    """uint8 (..., H, W, 3) -> float (..., 3, H, W) in [0, 1]; float input is taken as (..., 3, H, W) already."""
    if value.dtype == torch.uint8:
        return value.movedim(-1, -3).float() / 255.0
    return value.float()


class Policy(nn.Module, abc.ABC):
    """Base class: normaliser, observation checks, rollout queues."""

    name: ClassVar[str]
    config_class: ClassVar[type[PolicyConfig]]
    # Whether the policy can continue a previous chunk by inpainting (real-time chunking, `rtc.py`).
    supports_rtc: ClassVar[bool] = False

    def __init__(self, config: PolicyConfig, stats: Mapping[str, Mapping[str, Tensor]] | None = None) -> None:
        super().__init__()
        config.validate_features()
        self.config = config
        self.normalizer = Normalizer(
            {**config.input_features, **config.output_features}, config.normalization_modes(), stats
        )
        self._action_queue: deque[Tensor] = deque()
        # Set by the trainer and by load_policy (lerobot_ros.json), not a config field: config.json stays LeRobot's.
        self.relative_actions: RelativeActions | None = None
        self._observation_history: deque[Batch] = deque(maxlen=config.n_obs_steps)

    @abc.abstractmethod
    def compute_loss(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        """Training loss of a batch (normalisation is applied inside)."""

    @abc.abstractmethod
    def predict_chunk_batch(self, batch: Batch) -> Tensor:
        """(B, chunk_length, action_dim) de-normalised actions for a batch of observations."""

    def predict_chunk_inpainted_batch(self, batch: Batch, prefix: RtcPrefix) -> Tensor:
        """Like `predict_chunk_batch`, continuing `prefix` (real-time chunking); only where `supports_rtc`."""
        raise PolicyConfigError(
            f"the {self.name} policy cannot inpaint a chunk, so real-time chunking (blend rtc) does not apply to it; "
            "use blend replace, crossfade or ensemble, or a diffusion policy"
        )

    @classmethod
    def lerobot_key(cls, key: str) -> str:
        """The name LeRobot's implementation gives the tensor `key` of this module (identity unless overridden)."""
        return key

    @classmethod
    def own_key(cls, key: str) -> str:
        """Inverse of `lerobot_key`: this module's name for LeRobot's tensor `key`."""
        return key

    def load_pretrained_backbone(self, path: Path) -> None:
        """Initialise the image backbone from a local weights file (policies with a backbone override this)."""
        raise PolicyConfigError(f"the {self.name} policy has no image backbone to load {path} into")

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _observation_value(self, key: str, feature: PolicyFeature, value: Any) -> Tensor:
        tensor = torch.as_tensor(np.asarray(value)) if not isinstance(value, Tensor) else value
        tensor = image_to_chw_float(tensor) if feature.type is FeatureType.VISUAL else tensor.float()
        shape = tuple(tensor.shape)
        history_shape = (self.config.n_obs_steps, *feature.shape)
        if shape != feature.shape and not (self.config.n_obs_steps > 1 and shape == history_shape):
            what = "image" if feature.type is FeatureType.VISUAL else "value"
            raise FeatureMismatchError(
                f"observation {key!r}: {what} of shape {shape} (as (C, H, W) for cameras), the policy was trained "
                f"on {feature.shape}; resize the input or retrain"
            )
        return tensor.to(self.device)

    def prepare_observation(self, observation: Mapping[str, Any]) -> Batch:
        """One observation as a batch of one, with the policy's history axis when n_obs_steps > 1."""
        batch: Batch = {}
        for key, feature in self.config.input_features.items():
            if key not in observation:
                raise FeatureMismatchError(
                    f"observation lacks {key!r}, which the policy needs (it needs {sorted(self.config.input_features)})"
                )
            value = self._observation_value(key, feature, observation[key])
            if self.config.n_obs_steps > 1 and value.shape == feature.shape:
                value = value.unsqueeze(0).expand(self.config.n_obs_steps, *feature.shape)
            batch[key] = value.unsqueeze(0)
        return batch

    @torch.no_grad()
    def predict_chunk(self, observation: Mapping[str, Any], prefix: RtcPrefix | None = None) -> Tensor:
        """(chunk_length, action_dim) actions for one observation (see the module docstring); with `prefix` (absolute
        targets, like the result) the chunk continues the previous one: real-time chunking, where `supports_rtc`."""
        was_training = self.training
        self.eval()
        try:
            batch = self.prepare_observation(observation)
            if prefix is None:
                chunk = self.predict_chunk_batch(batch)[0]
            else:
                if self.relative_actions is not None:  # prefix - state = -((-prefix) + state)
                    relative = self.absolute_chunk(-prefix.actions.to(self.device), batch)
                    prefix = dataclasses.replace(prefix, actions=-relative)
                chunk = self.predict_chunk_inpainted_batch(batch, prefix)[0]
            return chunk if self.relative_actions is None else self.absolute_chunk(chunk, batch)
        finally:
            self.train(was_training)

    @torch.no_grad()
    def predict_chunks(self, observations: Sequence[Mapping[str, Any]]) -> Tensor:
        """(B, chunk_length, action_dim): `predict_chunk` of each of B observations (what evaluation with several envs
        and the policy node's `robots` mode run).

        On the CPU each observation is computed on its own, exactly as `predict_chunk` computes it, so an
        observation gets the same chunk, bit for bit, whichever other observations share the call (and the serial
        evaluation and the node get that chunk too). One batch cannot promise that: the BLAS picks its kernels by
        the number of rows and sums in a different order for each (MKL on an AMD EPYC: up to 1e-5 on ACT's chunk
        between an observation alone, padded to two rows, and the same observation in a batch of 2 or 4, or in
        row 1 instead of row 0; padding a batch of one to two rows had been enough on the machine where it was
        measured). It costs nothing there: on 2 CPU cores a batch of 4 took longer than 4 single rows (a small
        ACT with a 320x240 camera: 100 vs 87 ms). On an accelerator, where batching pays, the rows go as one batch
        and a row's last bits may depend on its batch. (A policy that samples noise, diffusion, draws it per call.)
        """
        if not observations:
            raise ValueError("predict_chunks needs at least one observation")
        if self.device.type == "cpu":
            return torch.stack([self.predict_chunk(observation) for observation in observations])
        prepared = [self.prepare_observation(observation) for observation in observations]
        batch = {key: torch.cat([p[key] for p in prepared]) for key in prepared[0]}
        was_training = self.training
        self.eval()
        try:
            chunks = self.predict_chunk_batch(batch)
            if self.relative_actions is not None:  # offsets from each observation's own state
                chunks = self.absolute_chunk(chunks, batch)
        finally:
            self.train(was_training)
        return chunks

    def absolute_chunk(self, chunk: Tensor, batch: Batch) -> Tensor:
        """Relative actions plus the state of the observations they were computed from (each one's newest frame).

        `chunk` is one (chunk_length, action_dim) chunk of the batch-of-one `batch`, or (B, chunk_length,
        action_dim) chunks of a batch of B observations.
        """
        relative = self.relative_actions
        assert relative is not None
        if relative.state_key not in batch:
            raise FeatureMismatchError(
                f"the policy predicts actions relative to {relative.state_key!r}, which the observation lacks"
            )
        state = batch[relative.state_key]
        if state.ndim > 2:  # (B, n_obs_steps, S) history: the newest frame is the observation's own
            state = state[:, -1]
        offsets = state[..., list(relative.state_indices)].to(device=chunk.device, dtype=chunk.dtype)
        offsets = offsets[0] if chunk.ndim == 2 else offsets[: chunk.shape[0], None, :]
        absolute = chunk.clone()
        absolute[..., list(relative.action_indices)] += offsets
        return absolute

    def reset(self) -> None:
        """Forget queued actions and observation history (call at the start of every episode)."""
        self._action_queue.clear()
        self._observation_history.clear()

    @torch.no_grad()
    def select_action(self, observation: Mapping[str, Any]) -> Tensor:
        """The next action of a rollout: re-plans when the queue of `n_action_steps` actions runs dry."""
        single = {key: value for key, value in observation.items() if key in self.config.input_features}
        if self.config.n_obs_steps > 1:
            step = {key: value[0, -1] for key, value in self.prepare_observation(single).items()}
            while len(self._observation_history) < self.config.n_obs_steps:
                self._observation_history.append(step)  # LeRobot pads the history with the first frame
            self._observation_history.append(step)
            stacked = {key: torch.stack([h[key] for h in self._observation_history]) for key in step}
        else:
            stacked = single
        if not self._action_queue:
            chunk = self.predict_chunk(stacked)[: self.config.executed_steps]
            self._action_queue.extend(chunk)
        return self._action_queue.popleft()
