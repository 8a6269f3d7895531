"""Data loading: windows and padding as LeRobot's delta_timestamps, caching, split without leakage, errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY

from lerobot_dataset import DatasetReader
from lerobot_dataset import stats as stats_mod
from lerobot_training.data import (
    PolicyDataset,
    StepBatchSampler,
    check_dataset_matches,
    dataset_features,
    split_episodes,
    training_stats,
)
from lerobot_training.errors import FeatureMismatchError
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.act import ACTConfig
from lerobot_training.policies.config import PolicyConfig
from lerobot_training.policies.diffusion import DiffusionConfig
from lerobot_training.transforms import ImageTransforms, ImageTransformsConfig

CONFIGS = {"act": ACTConfig, "diffusion": DiffusionConfig}


def policy_config(reader: DatasetReader, policy: str) -> PolicyConfig:
    inputs, outputs = dataset_features(reader)
    return CONFIGS[policy](input_features=inputs, output_features=outputs, **TINY[policy])


@pytest.mark.parametrize("policy", ["act", "diffusion"])
def test_windows_and_padding_match_the_readers_delta_timestamps(tiny_dataset: Path, policy: str) -> None:
    reader = DatasetReader(tiny_dataset)
    config = policy_config(reader, policy)
    episodes = [1, 3]
    dataset = PolicyDataset(tiny_dataset, episodes, config)
    fps = reader.fps
    delta = {"action": [k / fps for k in config.action_delta_indices]}
    if config.n_obs_steps > 1:
        delta.update({key: [k / fps for k in config.observation_delta_indices] for key in config.input_features})
    position = 0
    for episode in episodes:
        start, end = reader.episode_range(episode)
        for index in range(start, end):
            expected = reader.get(index, delta)
            item = dataset[position]
            position += 1
            assert np.array_equal(item["action"].numpy(), expected["action"])
            assert np.array_equal(item["action_is_pad"].numpy(), expected["action_is_pad"])
            assert np.array_equal(item["observation.state"].numpy(), expected["observation.state"])
            camera = item["observation.images.front"].numpy()
            assert np.array_equal(np.moveaxis(camera, -3, -1), expected["observation.images.front"])
            if config.n_obs_steps > 1:
                assert np.array_equal(item["observation.state_is_pad"].numpy(), expected["observation.state_is_pad"])
    assert position == len(dataset)
    assert dataset[0]["action_is_pad"].sum() == 0 or policy == "diffusion"
    assert dataset[len(dataset) - 1]["action_is_pad"][-1]  # the last frame's chunk runs past the episode
    reader.close()


def test_cached_and_uncached_decoding_give_the_same_frames(tiny_dataset: Path) -> None:
    reader = DatasetReader(tiny_dataset)
    config = policy_config(reader, "diffusion")
    cached = PolicyDataset(tiny_dataset, [0, 2], config, cache_episodes=True)
    uncached = PolicyDataset(tiny_dataset, [0, 2], config, cache_episodes=False)
    for index in (0, 5, 13, len(cached) - 1):
        a, b = cached[index], uncached[index]
        assert set(a) == set(b)
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_image_features_stored_as_png_load_too(make_dataset: Callable[..., Path]) -> None:
    root = make_dataset(camera="image", episodes=2, frames=5)
    reader = DatasetReader(root)
    config = policy_config(reader, "act")
    item = PolicyDataset(root, [1], config)[2]
    assert (
        item["observation.images.front"].shape == (3, 32, 48) and item["observation.images.front"].dtype == torch.uint8
    )
    assert item["observation.images.front"][:, 0, 0].tolist() == [90, 90, 90]


def test_split_is_by_episode_seeded_and_disjoint() -> None:
    train, val = split_episodes(10, 0.2, seed=7)
    assert len(val) == 2 and len(train) == 8 and not set(train) & set(val)
    assert split_episodes(10, 0.2, seed=7) == (train, val)
    assert split_episodes(10, 0.2, seed=8) != (train, val)
    assert split_episodes(1, 0.5, seed=0) == ([0], [])
    assert len(split_episodes(4, 0.1, seed=0)[1]) == 1  # a small dataset still gets a validation episode
    assert split_episodes(4, 0.0, seed=0) == ([0, 1, 2, 3], [])


def test_normalisation_statistics_come_from_training_episodes_only(tiny_dataset: Path) -> None:
    reader = DatasetReader(tiny_dataset)
    inputs, outputs = dataset_features(reader)
    features = {**inputs, **outputs}
    train = [0, 1, 2]
    stats = training_stats(reader, train, features)
    # observation.state[2] is 10 * episode + frame: episode 3 (held out) would raise the max to 41
    assert float(stats["observation.state"]["max"][2]) == 10 * 2 + 11
    expected = stats_mod.aggregate([reader.meta.episode_stats(reader.episodes[i]) for i in train])
    assert np.allclose(stats["action"]["mean"].numpy(), expected["action"]["mean"])
    full = reader.meta.stats["observation.state"]["max"][2]
    assert full == 41.0
    dataset = PolicyDataset(tiny_dataset, train, policy_config(reader, "act"))
    states = torch.stack([dataset[i]["observation.state"] for i in range(len(dataset))])
    assert float(states[:, 2].max()) == 31.0  # no frame of episode 3 is served


def test_imagenet_image_statistics_option(tiny_dataset: Path) -> None:
    reader = DatasetReader(tiny_dataset)
    inputs, outputs = dataset_features(reader)
    stats = training_stats(reader, [0], {**inputs, **outputs}, image_stats="imagenet")
    assert torch.allclose(stats["observation.images.front"]["mean"].flatten(), torch.tensor([0.485, 0.456, 0.406]))


def test_missing_feature_and_wrong_image_size_are_named(tiny_dataset: Path) -> None:
    reader = DatasetReader(tiny_dataset)
    with pytest.raises(FeatureMismatchError, match=r"lacks feature 'observation\.images\.wrist'"):
        dataset_features(reader, ["observation.state", "observation.images.wrist"])
    inputs, outputs = dataset_features(reader)
    inputs["observation.images.front"] = PolicyFeature(FeatureType.VISUAL, (3, 48, 64))
    config = ACTConfig(input_features=inputs, output_features=outputs, **TINY["act"])
    with pytest.raises(
        FeatureMismatchError, match=r"'observation\.images\.front' has shape \(3, 32, 48\).*\(3, 48, 64\)"
    ):
        check_dataset_matches(reader, config)


def test_dataset_without_action_is_refused(tmp_path: Path) -> None:
    from lerobot_dataset import DatasetWriter, FeatureSpec

    root = tmp_path / "no_action"
    with DatasetWriter.create(
        root, repo_id="local/x", fps=10, features={"observation.state": FeatureSpec("float32", (2,))}
    ) as w:
        w.start_episode("t")
        w.add_frame({"observation.state": np.zeros(2, dtype=np.float32)})
        w.save_episode()
    with pytest.raises(FeatureMismatchError, match="no 'action' feature"):
        dataset_features(DatasetReader(root))


def test_sampler_order_depends_only_on_seed_and_step() -> None:
    full = list(StepBatchSampler(size=10, batch_size=4, seed=3, start_step=0, total_steps=7))
    resumed = list(StepBatchSampler(size=10, batch_size=4, seed=3, start_step=4, total_steps=7))
    assert resumed == full[4:]
    first_epoch = [pos for batch in full for pos, _ in batch][:10]
    assert sorted(first_epoch) == list(range(10))  # every frame once per epoch
    other = list(StepBatchSampler(size=10, batch_size=4, seed=4, start_step=0, total_steps=7))
    assert other != full


def test_augmented_dataset_items_are_reproducible(tiny_dataset: Path) -> None:
    reader = DatasetReader(tiny_dataset)
    transforms = ImageTransforms(ImageTransformsConfig(enable=True))
    dataset = PolicyDataset(tiny_dataset, [0], policy_config(reader, "act"), augmentation=transforms)
    assert torch.equal(dataset[(3, 99)]["observation.images.front"], dataset[(3, 99)]["observation.images.front"])
    assert not torch.equal(dataset[(3, 99)]["observation.images.front"], dataset[3]["observation.images.front"])


def test_episode_cache_is_used_only_when_all_episodes_fit(tiny_dataset: Path) -> None:
    reader = DatasetReader(tiny_dataset)
    config = policy_config(reader, "act")
    roomy = PolicyDataset(tiny_dataset, [0, 1], config, cache_bytes=2**30)
    tight = PolicyDataset(tiny_dataset, [0, 1], config, cache_bytes=32 * 48 * 3 * 10)  # 10 frames of 24
    assert roomy.cache_episodes and not tight.cache_episodes
    assert torch.equal(roomy[7]["observation.images.front"], tight[7]["observation.images.front"])
