"""Normalisation: round trips in both modes, statistics checks."""

from __future__ import annotations

import pytest
import torch

from lerobot_training.errors import NormalizationError
from lerobot_training.features import FeatureType, NormalizationMode, PolicyFeature
from lerobot_training.normalize import Normalizer

FEATURES = {
    "observation.state": PolicyFeature(FeatureType.STATE, (3,)),
    "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, 4, 5)),
    "action": PolicyFeature(FeatureType.ACTION, (3,)),
}
STATS = {
    "observation.state": {"mean": torch.tensor([1.0, -2.0, 30.0]), "std": torch.tensor([0.5, 2.0, 10.0]),
                          "min": torch.tensor([0.0, -5.0, 10.0]), "max": torch.tensor([2.0, 1.0, 50.0])},
    "observation.images.front": {"mean": torch.tensor([[[0.4]], [[0.5]], [[0.6]]]),
                                 "std": torch.tensor([[[0.2]], [[0.25]], [[0.3]]])},
    "action": {"min": torch.tensor([-1.0, 0.0, 100.0]), "max": torch.tensor([1.0, 2.0, 300.0])},
}  # fmt: skip
MODES = {
    "observation.state": NormalizationMode.MEAN_STD,
    "observation.images.front": NormalizationMode.MEAN_STD,
    "action": NormalizationMode.MIN_MAX,
}


def test_round_trip_in_both_modes() -> None:
    normalizer = Normalizer(FEATURES, MODES, STATS)
    batch = {
        "observation.state": torch.randn(7, 3) * 10,
        "observation.images.front": torch.rand(7, 2, 3, 4, 5),  # with a history axis
        "action": torch.randn(7, 5, 3) * 100,
        "action_is_pad": torch.zeros(7, 5, dtype=torch.bool),
    }
    normalized = normalizer.normalize(batch)
    assert torch.equal(normalized["action_is_pad"], batch["action_is_pad"])
    back = normalizer.unnormalize(normalized)
    for key in FEATURES:
        assert torch.allclose(back[key], batch[key], atol=1e-4, rtol=1e-5), key


def test_modes_map_to_the_documented_ranges() -> None:
    normalizer = Normalizer(FEATURES, MODES, STATS)
    action = normalizer.normalize_value("action", torch.stack([STATS["action"]["min"], STATS["action"]["max"]]))
    assert torch.allclose(action, torch.tensor([[-1.0] * 3, [1.0] * 3]), atol=1e-6)
    state = normalizer.normalize_value("observation.state", STATS["observation.state"]["mean"])
    assert torch.allclose(state, torch.zeros(3))


def test_statistics_travel_in_the_state_dict() -> None:
    normalizer = Normalizer(FEATURES, MODES, STATS)
    keys = set(normalizer.state_dict())
    assert {"buffer_observation_state.mean", "buffer_observation_state.std", "buffer_action.min", "buffer_action.max",
            "buffer_observation_images_front.mean"} <= keys  # fmt: skip
    fresh = Normalizer(FEATURES, MODES)
    fresh.load_state_dict(normalizer.state_dict())
    value = torch.randn(2, 3)
    assert torch.equal(
        fresh.normalize_value("observation.state", value), normalizer.normalize_value("observation.state", value)
    )


def test_missing_or_wrong_statistics_name_the_feature() -> None:
    with pytest.raises(NormalizationError, match=r"'min'.*'action'"):
        Normalizer(FEATURES, MODES, {**STATS, "action": {"mean": torch.zeros(3), "std": torch.ones(3)}})
    with pytest.raises(NormalizationError, match=r"'mean'.*observation.state.*2 values"):
        Normalizer(FEATURES, MODES, {**STATS, "observation.state": {"mean": torch.zeros(2), "std": torch.ones(2)}})
    unset = Normalizer(FEATURES, MODES)
    with pytest.raises(NormalizationError, match="never set"):
        unset.normalize_value("action", torch.zeros(3))


def test_identity_features_pass_through() -> None:
    normalizer = Normalizer(FEATURES, {"action": NormalizationMode.IDENTITY}, {})
    value = torch.randn(3)
    assert torch.equal(normalizer.normalize_value("action", value), value)


def test_mapping_by_feature_key_overrides_the_feature_type() -> None:
    from lerobot_training.policies.act import ACTConfig

    inputs = {key: ft for key, ft in FEATURES.items() if key != "action"}
    config = ACTConfig(
        input_features=inputs,
        output_features={"action": FEATURES["action"]},
        normalization_mapping={
            "VISUAL": "MEAN_STD",
            "STATE": "MEAN_STD",
            "ACTION": "MIN_MAX",
            "observation.state": "MIN_MAX",
        },
    )
    modes = config.normalization_modes()
    assert modes == {
        "observation.state": NormalizationMode.MIN_MAX,
        "observation.images.front": NormalizationMode.MEAN_STD,
        "action": NormalizationMode.MIN_MAX,
    }
