"""Training on several datasets at once (`--dataset A --dataset B`) and on a Hub dataset repo id.

Several datasets must give the same statistics and samples as their merge (`lerobot-ros dataset merge`);
different features or fps are refused in one line naming the difference; the checkpoint lists the datasets.
A Hub repo id resolves through huggingface_hub's cache (pre-populated here, HF_HUB_OFFLINE=1, in a real
`lerobot-ros train` process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, VECTOR_INPUTS
from test_training_trainer import run_cli

from lerobot_dataset import DatasetReader
from lerobot_dataset.merge import merge_datasets
from lerobot_ros.command import CommandError
from lerobot_ros.testing import write_hub_cache
from lerobot_training.data import PolicyDataset, dataset_features, open_reader, training_stats
from lerobot_training.trainer import TrainConfig, Trainer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def make_config(dataset: Any, out: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = {
        "steps": 2, "batch_size": 4, "lr": 1e-3, "warmup_steps": 1, "val_fraction": 0.25, "val_every": 2,
        "val_batches": 1, "save_every": 2, "log_every": 1, "seed": 5, "policy_overrides": TINY["act"],
        "progress": False, "input_features": VECTOR_INPUTS,
    }  # fmt: skip
    settings.update(overrides)
    return TrainConfig(dataset=dataset, policy="act", out=out, **settings)


def test_several_datasets_train_like_their_merge(make_dataset: Callable[..., Path], tmp_path: Path) -> None:
    a, b = make_dataset(episodes=2), make_dataset(episodes=3, frames=9)
    merged = tmp_path / "merged"
    merge_datasets([a, b], merged)
    collection, single = open_reader([a, b]), open_reader(merged)
    assert collection.num_episodes == single.num_episodes == 5 and len(collection) == len(single)
    inputs, outputs = dataset_features(single, None)
    features = {**inputs, **outputs}
    episodes = [0, 2, 3, 4]
    ours, reference = training_stats(collection, episodes, features), training_stats(single, episodes, features)
    for key in features:
        for name, value in reference[key].items():
            assert torch.equal(ours[key][name], value), (key, name)
    for episode in range(5):
        assert collection.episode_range(episode) == single.episode_range(episode)
        np.testing.assert_array_equal(
            collection.episode_frames(episode, "observation.images.front"),
            single.episode_frames(episode, "observation.images.front"),
        )
    collection.close()
    single.close()
    trainer = Trainer(make_config([a, b], tmp_path / "run"))
    policy_config = trainer.policy.config
    several, one = PolicyDataset([a, b], episodes, policy_config), PolicyDataset(merged, episodes, policy_config)
    assert len(several) == len(one)
    for index in range(0, len(one), 5):
        for key, value in one[index].items():
            assert torch.equal(several[index][key], value), (index, key)
    final = trainer.train()
    meta = json.loads((final / "lerobot_ros.json").read_text())
    assert meta["datasets"] == [str(a), str(b)]
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["dataset"] == [str(a), str(b)]
    resumed = Trainer(TrainConfig.from_json({**saved, "steps": 3}), resume=True)  # the saved list resumes
    assert resumed.config.datasets == [a, b]


def test_an_old_train_config_with_one_dataset_still_loads(tiny_dataset: Path, tmp_path: Path) -> None:
    config = TrainConfig.from_json({**make_config(tiny_dataset, tmp_path).to_json(), "dataset": str(tiny_dataset)})
    assert config.dataset == tiny_dataset and config.datasets == [tiny_dataset]
    assert config.to_json()["dataset"] == str(tiny_dataset)


def test_datasets_with_different_features_or_fps_are_refused(make_dataset: Callable[..., Path], tmp_path: Path) -> None:
    a = make_dataset(episodes=2)
    other = make_dataset(episodes=2, extra_cameras={"wrist": (16, 16, 3)})
    base = ["--policy", "act", "--out", str(tmp_path / "run"), "--steps", "1", "--no-progress"]
    with pytest.raises(
        CommandError, match=r"cannot train on .* features differ \(feature 'observation\.images\.wrist'"
    ):
        run_cli(["--dataset", str(a), "--dataset", str(other), *base])
    slow = make_dataset(episodes=2)
    info = json.loads((slow / "meta/info.json").read_text())
    info["fps"] = 5
    (slow / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(CommandError, match=r"\(5 fps\) .* \(10 fps\): fps differ"):
        run_cli(["--dataset", str(a), "--dataset", str(slow), *base])
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_hub_repo_id_trains_from_the_huggingface_cache_offline(tiny_dataset: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hf-cache"
    snapshot = write_hub_cache(cache, "someone/tiny", tiny_dataset, COMMIT)
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    sets = [f"--set={k}={json.dumps(v)}" for k, v in TINY["act"].items()]
    features = [f"--feature={key}" for key in VECTOR_INPUTS]
    command = [sys.executable, "-m", "lerobot_ros.cli", "train", "--dataset", "someone/tiny", "--dataset",
               str(tiny_dataset), "--policy", "act", "--out", str(tmp_path / "run"), "--steps", "2",
               "--batch-size", "4", "--no-progress", "--threads", "1", *sets, *features]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    meta = json.loads((tmp_path / "run/checkpoints/000002/pretrained_model/lerobot_ros.json").read_text())
    assert meta["datasets"] == [str(snapshot), str(tiny_dataset)]
    with DatasetReader(snapshot) as reader:
        assert reader.num_episodes == 4
    missing = [*command[:5], "someone/absent", *command[6:]]
    result = subprocess.run(missing, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "--dataset someone/absent: not in the local Hugging Face cache and the Hub cannot be reached "
            "(HF_HUB_OFFLINE=1 or no network); download it once online or pass a local folder"
        )
    )
