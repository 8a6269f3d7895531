"""Checkpoints both ways with LeRobot 0.4.4 itself: a checkpoint written by LeRobot's `lerobot-train` loads
here and predicts what LeRobot predicts (ACT with cameras of different sizes, diffusion), and a checkpoint
trained here loads in LeRobot (`from_pretrained` + `make_pre_post_processors`) and predicts what we predict.

Runs LeRobot in the reference venv (.venv-lerobot-ref) with the extra training packages of
requirements/lerobot-act-train.txt installed `--no-deps --target .venv-lerobot-ref/act-extras`;
skipped when either is absent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, VECTOR_INPUTS

from lerobot_ros import testing
from lerobot_ros.testing import reference_has, reference_python, run_in_reference_venv
from lerobot_training.checkpoint import load_policy
from lerobot_training.features import FeatureType
from lerobot_training.policies.config import PolicyConfig
from lerobot_training.trainer import TrainConfig, Trainer

HERE = Path(__file__).resolve().parent
REF_PYTHON = reference_python()
TOLERANCE = 1e-5

pytestmark = [
    pytest.mark.reference,
    pytest.mark.slow,
    pytest.mark.skipif(
        not reference_has("draccus"),
        reason="needs .venv-lerobot-ref (scripts/setup.sh --with-lerobot-reference) and the ACT training extras: "
        "pip install --no-deps --target .venv-lerobot-ref/act-extras -r requirements/lerobot-act-train.txt",
    ),
]

TINY_LEROBOT_ACT = [
    "--policy.type=act", "--policy.pretrained_backbone_weights=null", "--policy.dim_model=64", "--policy.n_heads=4",
    "--policy.dim_feedforward=128", "--policy.n_encoder_layers=2", "--policy.n_vae_encoder_layers=1",
    "--policy.chunk_size=5", "--policy.n_action_steps=5", "--policy.latent_dim=8",
]  # fmt: skip
# LeRobot 0.6 changed diffusion's defaults (ImageNet ResNet-18 weights, batch norm): 0.4.4's are given.
TINY_LEROBOT_DIFFUSION = [
    "--policy.type=diffusion", "--policy.pretrained_backbone_weights=null", "--policy.use_group_norm=true",
    "--policy.down_dims=[16, 32]", "--policy.n_groups=4", "--policy.kernel_size=3",
    "--policy.diffusion_step_embed_dim=16", "--policy.spatial_softmax_num_keypoints=4", "--policy.horizon=8",
    "--policy.n_action_steps=4", "--policy.num_train_timesteps=20",
]  # fmt: skip


def lerobot_train(tmp_path: Path, dataset: Path, policy_args: list[str]) -> Path:
    """Train 2 steps with LeRobot's own lerobot-train on a `make_dataset` dataset."""
    return testing.lerobot_train(tmp_path, dataset, "local/tiny", policy_args)


def random_observation(config: PolicyConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """One observation for `config`'s inputs: vectors ~ N(0, 1), cameras float (3, H, W) in [0, 1]."""
    generator = torch.Generator().manual_seed(seed)
    observation = {}
    for key, feature in config.input_features.items():
        if feature.type is FeatureType.VISUAL:
            observation[key] = torch.rand(feature.shape, generator=generator)
        else:
            observation[key] = torch.randn(feature.shape, generator=generator)
    return observation


def lerobot_chunk(tmp_path: Path, checkpoint: Path, observation: dict[str, torch.Tensor], seed: int) -> np.ndarray:
    np.savez(tmp_path / "observation.npz", **{k: v.numpy() for k, v in observation.items()})
    args = [str(HERE / "lerobot_predict.py"), str(checkpoint), str(tmp_path / "observation.npz")]
    run_in_reference_venv(tmp_path, [*args, str(tmp_path / "ref.npz"), str(seed)])
    chunk: np.ndarray = np.load(tmp_path / "ref.npz")["chunk"]
    return chunk


def our_chunk(checkpoint: Path, observation: dict[str, torch.Tensor], seed: int, steps: int) -> tuple[Any, np.ndarray]:
    loaded = load_policy(checkpoint)
    torch.manual_seed(seed)
    chunk = loaded.policy.predict_chunk(observation)[:steps].numpy()
    return loaded, chunk


def test_lerobot_trained_act_checkpoint_loads_and_matches_lerobots_prediction(
    make_dataset: Callable[..., Path], tmp_path: Path
) -> None:
    dataset = make_dataset(episodes=2, frames=10, image_shape=(64, 96, 3))
    checkpoint = lerobot_train(tmp_path, dataset, TINY_LEROBOT_ACT)
    loaded = load_policy(checkpoint)
    assert loaded.source == "lerobot"
    config = loaded.policy.config
    assert config.chunk_size == 5 and config.dim_model == 64
    assert set(config.input_features) == {
        "observation.state",
        "observation.images.front",
        "observation.environment_state",
    }
    observation = random_observation(config)
    expected = lerobot_chunk(tmp_path, checkpoint, observation, seed=0)
    _, ours = our_chunk(checkpoint, observation, seed=0, steps=5)
    assert ours.shape == expected.shape == (5, 3)
    np.testing.assert_allclose(ours, expected, rtol=TOLERANCE, atol=TOLERANCE)


def test_lerobot_trained_act_with_two_camera_sizes_matches_lerobots_prediction(
    make_dataset: Callable[..., Path], tmp_path: Path
) -> None:
    dataset = make_dataset(episodes=2, frames=10, image_shape=(64, 96, 3), extra_cameras={"wrist": (48, 64, 3)})
    checkpoint = lerobot_train(tmp_path, dataset, TINY_LEROBOT_ACT)
    loaded, _ = our_chunk(checkpoint, random_observation(load_policy(checkpoint).policy.config), 0, 5)
    shapes = {key: ft.shape for key, ft in loaded.policy.config.image_features.items()}
    assert shapes == {"observation.images.front": (3, 64, 96), "observation.images.wrist": (3, 48, 64)}
    observation = random_observation(loaded.policy.config, seed=1)
    expected = lerobot_chunk(tmp_path, checkpoint, observation, seed=0)
    _, ours = our_chunk(checkpoint, observation, seed=0, steps=5)
    np.testing.assert_allclose(ours, expected, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize("scheduler", ["DDPM", "DDIM"])
def test_lerobot_trained_diffusion_checkpoint_matches_lerobots_prediction(
    make_dataset: Callable[..., Path], tmp_path: Path, scheduler: str
) -> None:
    dataset = make_dataset(episodes=2, frames=12, image_shape=(32, 48, 3))
    args = [*TINY_LEROBOT_DIFFUSION, f"--policy.noise_scheduler_type={scheduler}"]
    if scheduler == "DDIM":
        args.append("--policy.num_inference_steps=5")
    checkpoint = lerobot_train(tmp_path, dataset, args)
    loaded = load_policy(checkpoint)
    assert loaded.source == "lerobot" and loaded.policy.config.noise_scheduler_type == scheduler
    observation = random_observation(loaded.policy.config, seed=2)
    expected = lerobot_chunk(tmp_path, checkpoint, observation, seed=7)
    _, ours = our_chunk(checkpoint, observation, seed=7, steps=4)
    assert ours.shape == expected.shape == (4, 3)
    np.testing.assert_allclose(ours, expected, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize("policy", ["act", "diffusion"])
def test_lerobot_runs_a_checkpoint_trained_here_and_predicts_our_chunks(
    make_dataset: Callable[..., Path], tmp_path: Path, policy: str
) -> None:
    dataset = make_dataset(episodes=2, frames=12, image_shape=(32, 48, 3))
    overrides = dict(TINY[policy])
    trainer = Trainer(
        TrainConfig(
            dataset=dataset, policy=policy, out=tmp_path / "run", steps=2, batch_size=2, save_every=2,
            val_every=2, val_batches=1, warmup_steps=1, progress=False, policy_overrides=overrides,
        )
    )  # fmt: skip
    trainer.train()
    checkpoint = tmp_path / "run" / "checkpoints" / "last" / "pretrained_model"
    config = load_policy(checkpoint).policy.config
    assert set(config.input_features) == {*VECTOR_INPUTS, "observation.images.front"}
    observation = random_observation(config, seed=3)
    expected = lerobot_chunk(tmp_path, checkpoint, observation, seed=11)
    loaded, ours = our_chunk(checkpoint, observation, seed=11, steps=config.executed_steps)
    assert loaded.source == "lerobot_ros"
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=TOLERANCE, atol=TOLERANCE)
