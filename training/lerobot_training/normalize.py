"""Per-feature normalisation (mean/std or min/max) with the statistics stored as module buffers.

The formulas are those of LeRobot's normaliser processor (eps 1e-8 added to std; for min/max only
where max equals min). Checkpoints store the statistics in LeRobot's processor files (see checkpoint.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lerobot_training.errors import NormalizationError
from lerobot_training.features import FeatureType, NormalizationMode, PolicyFeature

EPS = 1e-8
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

StatsDict = dict[str, dict[str, Tensor]]

_STATS_OF_MODE = {
    NormalizationMode.MEAN_STD: ("mean", "std"),
    NormalizationMode.MIN_MAX: ("min", "max"),
    NormalizationMode.IDENTITY: (),
}


def buffer_name(key: str) -> str:
    """Submodule name of a feature's statistics: `observation.state` -> `buffer_observation_state`."""
    return "buffer_" + key.replace(".", "_")


def stat_shape(feature: PolicyFeature) -> tuple[int, ...]:
    """Shape of one statistic: per channel (C, 1, 1) for cameras, the feature's shape otherwise."""
    if feature.type is FeatureType.VISUAL:
        return (feature.shape[0], 1, 1)
    return feature.shape


def imagenet_stats() -> dict[str, Tensor]:
    return {
        "mean": torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(3, 1, 1),
        "std": torch.tensor(IMAGENET_STD, dtype=torch.float32).view(3, 1, 1),
    }


def stats_to_tensors(stats: Mapping[str, Mapping[str, Any]]) -> StatsDict:
    """Dataset statistics (numpy arrays or nested lists, as in stats.json) as float32 tensors."""
    out: StatsDict = {}
    for key, feature_stats in stats.items():
        out[key] = {}
        for name, value in feature_stats.items():
            array = np.asarray(value)
            if array.dtype.kind in "fiub":
                out[key][name] = torch.as_tensor(array.astype(np.float32))
    return out


class _FeatureStats(nn.Module):
    """Holds the statistic buffers of one feature (registered so that they follow `.to(device)`)."""

    def __init__(self, names: tuple[str, ...], shape: tuple[int, ...]) -> None:
        super().__init__()
        for name in names:
            # inf marks "not set": using a normaliser without statistics is reported, not silently wrong.
            self.register_buffer(name, torch.full(shape, float("inf"), dtype=torch.float32))

    def stat(self, name: str) -> Tensor:
        value = getattr(self, name)
        assert isinstance(value, Tensor)
        return value


class Normalizer(nn.Module):
    """Normalises inputs/targets and de-normalises outputs, per feature and per mode."""

    def __init__(
        self,
        features: Mapping[str, PolicyFeature],
        modes: Mapping[str, NormalizationMode],
        stats: Mapping[str, Mapping[str, Tensor]] | None = None,
    ) -> None:
        super().__init__()
        self.features = dict(features)
        self.modes = dict(modes)
        self._holders: dict[str, _FeatureStats] = {}
        for key, feature in self.features.items():
            mode = self.modes.get(key, NormalizationMode.IDENTITY)
            if mode is NormalizationMode.IDENTITY:
                continue
            name = buffer_name(key)
            if name in self._holders:
                raise NormalizationError(f"features {key!r} and another feature map to the same buffer {name!r}")
            self._holders[name] = _FeatureStats(_STATS_OF_MODE[mode], stat_shape(feature))
            self.add_module(name, self._holders[name])
        if stats is not None:
            self.load_stats(stats)

    def load_stats(self, stats: Mapping[str, Mapping[str, Tensor]]) -> None:
        """Copy statistics in; every normalised feature needs its mode's statistics with a matching size."""
        for key in self.features:
            mode = self.modes.get(key, NormalizationMode.IDENTITY)
            if mode is NormalizationMode.IDENTITY:
                continue
            holder = self._holders[buffer_name(key)]
            for name in _STATS_OF_MODE[mode]:
                if key not in stats or name not in stats[key]:
                    raise NormalizationError(
                        f"no {name!r} statistic for feature {key!r} (mode {mode.value}); "
                        "recompute the dataset stats (meta/stats.json) or set its mode to IDENTITY"
                    )
                target = holder.stat(name)
                value = torch.as_tensor(stats[key][name], dtype=torch.float32)
                if value.numel() != target.numel():
                    raise NormalizationError(
                        f"statistic {name!r} of feature {key!r} has {value.numel()} values, the feature needs "
                        f"{target.numel()} (shape {tuple(target.shape)})"
                    )
                target.copy_(value.reshape(target.shape))

    def stats_dict(self) -> StatsDict:
        """The statistics in use, per feature."""
        out: StatsDict = {}
        for key in self.features:
            name = buffer_name(key)
            if name in self._holders:
                holder = self._holders[name]
                out[key] = {stat: buf.detach().clone() for stat, buf in holder.named_buffers()}
        return out

    def _holder(self, key: str) -> _FeatureStats | None:
        name = buffer_name(key)
        holder = self._holders.get(name)
        if holder is None:
            return None
        for stat, buf in holder.named_buffers():
            if torch.isinf(buf).any():
                raise NormalizationError(
                    f"statistic {stat!r} of feature {key!r} was never set; pass dataset stats when building the "
                    "policy or load it from a checkpoint"
                )
        return holder

    def normalize_value(self, key: str, value: Tensor) -> Tensor:
        holder = self._holder(key)
        if holder is None:
            return value
        mode = self.modes[key]
        if mode is NormalizationMode.MEAN_STD:
            return (value - holder.stat("mean")) / (holder.stat("std") + EPS)
        low, span = holder.stat("min"), self._span(holder)
        return 2 * (value - low) / span - 1

    def unnormalize_value(self, key: str, value: Tensor) -> Tensor:
        holder = self._holder(key)
        if holder is None:
            return value
        mode = self.modes[key]
        if mode is NormalizationMode.MEAN_STD:
            return value * holder.stat("std") + holder.stat("mean")
        low, span = holder.stat("min"), self._span(holder)
        return (value + 1) / 2 * span + low

    @staticmethod
    def _span(holder: _FeatureStats) -> Tensor:
        """max - min, with EPS where they are equal (LeRobot's normaliser processor rule)."""
        span = holder.stat("max") - holder.stat("min")
        return torch.where(span == 0, torch.full_like(span, EPS), span)

    def normalize(self, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """A copy of `batch` with every known feature normalised (other keys passed through)."""
        return {
            key: self.normalize_value(key, value) if key in self.features else value for key, value in batch.items()
        }

    def unnormalize(self, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {
            key: self.unnormalize_value(key, value) if key in self.features else value for key, value in batch.items()
        }
