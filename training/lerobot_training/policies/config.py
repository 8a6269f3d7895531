"""`PolicyConfig`: the fields every policy shares, JSON conversion and validation.

Field names follow LeRobot's `PreTrainedConfig` and the policy configs (`ACTConfig`,
`DiffusionConfig`) so that the `config.json` of a LeRobot checkpoint maps onto them field by field.
"""

from __future__ import annotations

import builtins
import dataclasses
import types
import typing
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from lerobot_training.errors import FeatureMismatchError, PolicyConfigError
from lerobot_training.features import (
    ACTION,
    OBS_STATE,
    FeatureType,
    NormalizationMode,
    PolicyFeature,
    features_from_json,
    features_to_json,
)

ConfigT = TypeVar("ConfigT", bound="PolicyConfig")

# Fields of LeRobot's PreTrainedConfig/TrainPipeline that say nothing about the network; ignored on load.
LEROBOT_RUNTIME_FIELDS = frozenset(
    {
        "device",
        "use_amp",
        "use_peft",
        "push_to_hub",
        "repo_id",
        "private",
        "tags",
        "license",
        "pretrained_path",
        "pretrained_revision",
        "policy_action_contract",
    }
)


def _mode(value: Any, where: str) -> NormalizationMode:
    if isinstance(value, NormalizationMode):
        return value
    try:
        return NormalizationMode(str(value).upper())
    except ValueError:
        known = ", ".join(m.value for m in NormalizationMode)
        raise PolicyConfigError(f"{where}: normalisation mode must be one of {known}, got {value!r}") from None


@dataclass
class PolicyConfig:
    """Fields shared by every policy; subclasses add theirs and set `type`."""

    type: ClassVar[str] = ""

    n_obs_steps: int = 1
    input_features: dict[str, PolicyFeature] = field(default_factory=dict)
    output_features: dict[str, PolicyFeature] = field(default_factory=dict)
    # Keys are feature types (VISUAL, STATE, ENV, ACTION) as in LeRobot, or feature keys (which win).
    normalization_mapping: dict[str, NormalizationMode] = field(
        default_factory=lambda: {
            "VISUAL": NormalizationMode.MEAN_STD,
            "STATE": NormalizationMode.MEAN_STD,
            "ACTION": NormalizationMode.MEAN_STD,
        }
    )

    def __post_init__(self) -> None:
        if self.n_obs_steps < 1:
            raise PolicyConfigError(f"n_obs_steps must be >= 1, got {self.n_obs_steps}")
        self.normalization_mapping = {
            str(k): _mode(v, f"normalization_mapping[{k!r}]") for k, v in self.normalization_mapping.items()
        }

    @property
    def robot_state_feature(self) -> PolicyFeature | None:
        feature = self.input_features.get(OBS_STATE)
        return feature if feature is not None and feature.type is FeatureType.STATE else None

    @property
    def env_state_feature(self) -> PolicyFeature | None:
        return next((ft for ft in self.input_features.values() if ft.type is FeatureType.ENV), None)

    @property
    def image_features(self) -> dict[str, PolicyFeature]:
        return {key: ft for key, ft in self.input_features.items() if ft.type is FeatureType.VISUAL}

    @property
    def action_feature(self) -> PolicyFeature:
        feature = self.output_features.get(ACTION)
        if feature is None:
            raise FeatureMismatchError(f"the policy has no {ACTION!r} output feature; add it to output_features")
        return feature

    @property
    def observation_delta_indices(self) -> list[int]:
        """Frame offsets of the observation window (0 = the current frame)."""
        return list(range(1 - self.n_obs_steps, 1))

    @property
    def action_delta_indices(self) -> list[int]:
        raise NotImplementedError

    @property
    def chunk_length(self) -> int:
        """Rows of `predict_chunk`'s output; row 0 is the action for the observation's own time step."""
        raise NotImplementedError

    @property
    def executed_steps(self) -> int:
        """Rows of a chunk a LeRobot-style rollout executes before asking again (`n_action_steps`)."""
        raise NotImplementedError

    def normalization_modes(self) -> dict[str, NormalizationMode]:
        """The mode of every input and output feature."""
        modes = {}
        for key, feature in {**self.input_features, **self.output_features}.items():
            mode = self.normalization_mapping.get(key, self.normalization_mapping.get(feature.type.value))
            modes[key] = mode if mode is not None else NormalizationMode.IDENTITY
        return modes

    def validate_features(self) -> None:
        """Checks that need the features (called when a policy is built)."""
        self.action_feature  # noqa: B018 -- raises when absent
        for key, feature in self.image_features.items():
            if len(feature.shape) != 3 or feature.shape[0] != 3:
                raise FeatureMismatchError(f"camera feature {key!r} must have shape (3, H, W), got {feature.shape}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with LeRobot's field names, `type` first."""
        out: dict[str, Any] = {"type": self.type}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name in ("input_features", "output_features"):
                value = features_to_json(value)
            elif item.name == "normalization_mapping":
                value = {k: v.value for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            out[item.name] = value
        return out

    @classmethod
    def from_dict(cls: builtins.type[ConfigT], data: Mapping[str, Any], *, ignore: Collection[str] = ()) -> ConfigT:
        """Build from `to_dict` output (or a LeRobot config.json); unknown fields raise unless in `ignore`."""
        declared = {item.name for item in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key == "type":
                if value != cls.type:
                    raise PolicyConfigError(f"config type is {value!r}, expected {cls.type!r}")
                continue
            if key not in declared:
                if key in ignore:
                    continue
                raise PolicyConfigError(
                    f"unknown {cls.type} config field {key!r}; remove it or upgrade lerobot_training"
                )
            kwargs[key] = cls._field_value(key, value, hints[key])
        try:
            return cls(**kwargs)
        except TypeError as err:
            raise PolicyConfigError(f"{cls.type} config: {err}") from None

    @classmethod
    def _field_value(cls, key: str, value: Any, hint: Any) -> Any:
        if key in ("input_features", "output_features"):
            return features_from_json(value, key)
        if key == "normalization_mapping":
            if not isinstance(value, Mapping):
                raise PolicyConfigError(f"normalization_mapping must be an object, got {value!r}")
            return {str(k): _mode(v, f"normalization_mapping[{k!r}]") for k, v in value.items()}
        return _typed_value(key, value, hint)


def _typed_value(key: str, value: Any, hint: Any) -> Any:
    """`value` checked against the field's type hint (int, float, bool, str, tuple of ints, or None)."""
    options = (
        typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        else (hint,)
    )
    if value is None:
        if type(None) in options:
            return None
        raise PolicyConfigError(f"config field {key!r} must not be null")
    for option in options:
        origin = typing.get_origin(option) or option
        if origin is bool and isinstance(value, bool):
            return value
        if origin is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if origin is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if origin is str and isinstance(value, str):
            return value
        if (
            origin is tuple
            and isinstance(value, (list, tuple))
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            return tuple(value)
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", type(None): "null"}
    expected = " or ".join(
        "a list of integers" if typing.get_origin(o) is tuple else names.get(o, str(o)) for o in options
    )
    raise PolicyConfigError(f"config field {key!r} must be {expected}, got {value!r}")
