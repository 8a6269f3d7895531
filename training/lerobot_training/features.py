"""Policy features: which dataset columns a policy reads and writes, with their type and shape.

Follows LeRobot's `PolicyFeature` (`type` + `shape`), with the column's element names added so that a
checkpoint says which joint each number is. Cameras have shape (channels, height, width) as the
policy sees them; the dataset stores (height, width, channels).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lerobot_training.errors import PolicyConfigError

ACTION = "action"
OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"
OBS_IMAGE_PREFIX = "observation.image"


class FeatureType(str, enum.Enum):
    """The role of a feature, as LeRobot names it (keys of `normalization_mapping`)."""

    STATE = "STATE"
    VISUAL = "VISUAL"
    ENV = "ENV"
    ACTION = "ACTION"


class NormalizationMode(str, enum.Enum):
    """How a feature is normalised: (x - mean) / std, min/max to [-1, 1], or not at all."""

    MEAN_STD = "MEAN_STD"
    MIN_MAX = "MIN_MAX"
    IDENTITY = "IDENTITY"


@dataclass(frozen=True)
class PolicyFeature:
    """One input or output of a policy."""

    type: FeatureType
    shape: tuple[int, ...]
    names: tuple[str, ...] | None = None

    def to_json(self, names: bool = True) -> dict[str, Any]:
        """`{"type", "shape"[, "names"]}`; `names=False` gives LeRobot's PolicyFeature (it refuses extra keys)."""
        out: dict[str, Any] = {"type": self.type.value, "shape": list(self.shape)}
        if names and self.names is not None:
            out["names"] = list(self.names)
        return out

    @classmethod
    def from_json(cls, key: str, data: Mapping[str, Any]) -> PolicyFeature:
        """Parse `{"type": "STATE", "shape": [6], "names": [...]}`; raises PolicyConfigError naming `key`."""
        try:
            ftype = FeatureType(str(data["type"]))
        except (KeyError, ValueError):
            known = ", ".join(t.value for t in FeatureType)
            raise PolicyConfigError(
                f"feature {key!r}: 'type' must be one of {known}, got {data.get('type')!r}"
            ) from None
        shape = data.get("shape")
        if not isinstance(shape, (list, tuple)) or not shape or not all(isinstance(d, int) and d > 0 for d in shape):
            raise PolicyConfigError(
                f"feature {key!r}: 'shape' must be a non-empty list of positive ints, got {shape!r}"
            )
        names = data.get("names")
        if names is not None:
            if isinstance(names, Mapping):  # LeRobot datasets sometimes nest names as {"motors": [...]}
                names = next(iter(names.values()), None)
            if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
                raise PolicyConfigError(f"feature {key!r}: 'names' must be a list of strings, got {names!r}")
        return cls(ftype, tuple(int(d) for d in shape), tuple(names) if names is not None else None)


def features_to_json(features: Mapping[str, PolicyFeature], names: bool = True) -> dict[str, dict[str, Any]]:
    return {key: ft.to_json(names) for key, ft in features.items()}


def features_from_json(data: Any, field_name: str) -> dict[str, PolicyFeature]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise PolicyConfigError(f"{field_name} must be an object of features, got {type(data).__name__}")
    return {str(key): PolicyFeature.from_json(str(key), value) for key, value in data.items()}


def feature_type_of(key: str, dtype: str) -> FeatureType | None:
    """The role LeRobot gives a dataset column (`dataset_to_policy_features`), None for bookkeeping columns."""
    if dtype in ("video", "image"):
        return FeatureType.VISUAL
    if key == ACTION:
        return FeatureType.ACTION
    if key == OBS_ENV_STATE:
        return FeatureType.ENV
    if key.startswith("observation"):
        return FeatureType.STATE
    return None
