"""Camera transforms configured as LeRobot's ImageTransformsConfig: deterministic per draw, uint8 of the same
shape, each type doing what its name says, the config round-tripping through JSON and the checkpoint, and
bad tables refused with one line naming the transform."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TINY

from lerobot_training.checkpoint import METADATA_NAME
from lerobot_training.errors import PolicyConfigError
from lerobot_training.trainer import TrainConfig, Trainer
from lerobot_training.transforms import TRANSFORM_TYPES, ImageTransforms, ImageTransformsConfig

FRAMES = torch.randint(0, 256, (2, 3, 24, 32), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)


def only(kind: str, **kwargs: Any) -> ImageTransforms:
    table = {"tfs": {"t": {"type": kind, "kwargs": kwargs}}, "max_num_transforms": 1}
    return ImageTransforms(ImageTransformsConfig.from_json(table))


def apply(transforms: ImageTransforms, seed: int, frames: torch.Tensor = FRAMES) -> torch.Tensor:
    return transforms(frames, torch.Generator().manual_seed(seed))


def test_lerobots_default_table_is_deterministic_per_seed_and_keeps_shape_and_dtype() -> None:
    transforms = ImageTransforms(ImageTransformsConfig(enable=True))
    assert transforms.names == ["brightness", "contrast", "saturation", "hue", "sharpness", "affine"]
    assert transforms.count == 3
    out = apply(transforms, 1)
    assert out.shape == FRAMES.shape and out.dtype == torch.uint8
    assert torch.equal(out, apply(transforms, 1))
    assert not torch.equal(out, apply(transforms, 2))


def test_disabled_transforms_leave_frames_alone() -> None:
    transforms = ImageTransforms(ImageTransformsConfig())
    assert not transforms.active
    assert torch.equal(apply(transforms, 1), FRAMES)


def test_picks_follow_weights_count_and_order() -> None:
    table = {
        "max_num_transforms": 2,
        "tfs": {
            "a": {"type": "ColorJitter", "weight": 1.0, "kwargs": {"brightness": [0.9, 1.1]}},
            "never": {"type": "SharpnessJitter", "weight": 0.0, "kwargs": {"sharpness": [0.5, 1.5]}},
            "b": {"type": "RandomAffine", "weight": 1.0, "kwargs": {"degrees": [-5, 5]}},
        },
    }
    transforms = ImageTransforms(ImageTransformsConfig.from_json(table))
    for seed in range(20):
        assert transforms.pick(torch.Generator().manual_seed(seed)) == ["a", "b"]  # listed order, zero weight never
    shuffled = ImageTransforms(ImageTransformsConfig.from_json({**table, "random_order": True}))
    orders = {tuple(shuffled.pick(torch.Generator().manual_seed(seed))) for seed in range(40)}
    assert orders == {("a", "b"), ("b", "a")}


def test_each_type_does_what_its_name_says() -> None:
    flat = torch.full((1, 3, 24, 32), 100, dtype=torch.uint8)
    assert apply(only("ColorJitter", brightness=[1.5, 1.5]), 0, flat).unique().tolist() == [150]
    gray = torch.full((1, 3, 8, 8), 90, dtype=torch.uint8)
    assert torch.equal(apply(only("ColorJitter", saturation=[0.0, 0.0]), 0, gray), gray)  # gray has no saturation
    red = torch.zeros((1, 3, 4, 4), dtype=torch.uint8)
    red[:, 0] = 200
    shifted = apply(only("ColorJitter", hue=[1 / 3, 1 / 3]), 0, red)  # red + 120 degrees = green
    assert shifted[0, :, 0, 0].tolist() == [0, 200, 0]
    assert torch.equal(apply(only("SharpnessJitter", sharpness=[1.0, 1.0]), 0), FRAMES)  # factor 1: unchanged
    assert torch.equal(apply(only("RandomAffine", degrees=[0, 0]), 0), FRAMES)  # identity transform
    moved = apply(only("RandomAffine", translate=[0.25, 0.0]), 3)
    assert not torch.equal(moved, FRAMES) and (moved == 0).any()  # shifted in, filled with black
    assert torch.equal(apply(only("RandomResizedCrop", scale=[1.0, 1.0]), 0), FRAMES)


def test_the_table_round_trips_through_json_and_the_checkpoint(tiny_dataset: Path, tmp_path: Path) -> None:
    table = {
        "enable": True,
        "max_num_transforms": 2,
        "random_order": True,
        "tfs": {"crop": {"type": "RandomResizedCrop", "weight": 2.0, "kwargs": {"scale": [0.8, 1.0]}}},
    }
    config = ImageTransformsConfig.from_json(table)
    assert ImageTransformsConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    settings = TrainConfig(
        dataset=tiny_dataset, policy="act", out=tmp_path / "run", steps=1, batch_size=2, save_every=1, val_every=1,
        policy_overrides=TINY["act"], image_transforms=table, progress=False,
    )  # fmt: skip
    final = Trainer(settings).train()
    saved = json.loads((final / METADATA_NAME).read_text())["image_transforms"]
    assert ImageTransformsConfig.from_json(saved) == config


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"tfs": {"x": {"type": "Solarize", "kwargs": {"threshold": [0, 1]}}}}, "unknown type 'Solarize'"),
        ({"tfs": {"x": {"type": "ColorJitter", "kwargs": {"gamma": [0, 1]}}}}, "ColorJitter has no parameter 'gamma'"),
        ({"tfs": {"x": {"type": "ColorJitter", "kwargs": {"hue": [-0.7, 0]}}}}, "hue must lie within"),
        ({"tfs": {"x": {"type": "ColorJitter", "kwargs": {"brightness": [1.2, 0.8]}}}}, "low <= high"),
        ({"tfs": {"x": {"type": "ColorJitter", "weight": -1, "kwargs": {"contrast": [1, 1]}}}}, "weight must be"),
        ({"max_num_transforms": 0}, "max_num_transforms must be an integer >= 1"),
        ({"blur": True}, "unknown field"),
    ],
)
def test_bad_tables_name_the_transform_and_the_problem(table: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyConfigError, match=message):
        ImageTransformsConfig.from_json(table)


def test_every_type_is_listed_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "packages" / "training.md").read_text()
    for kind in TRANSFORM_TYPES:
        assert f"`{kind}`" in readme, kind
