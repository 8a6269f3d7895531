"""Fixtures of the training tests: tiny synthetic datasets (written with the project's DatasetWriter),
tiny policy configs, and a fixed thread count so results are reproducible on shared cores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lerobot_dataset import DatasetWriter, FeatureSpec

STATE_NAMES = ["shoulder_pan.pos", "elbow_flex.pos", "gripper.pos"]
IMAGE_SHAPE = (32, 48, 3)

TINY_ACT: dict[str, Any] = {
    "chunk_size": 6,
    "n_action_steps": 6,
    "dim_model": 32,
    "n_heads": 2,
    "dim_feedforward": 64,
    "n_encoder_layers": 1,
    "n_decoder_layers": 1,
    "n_vae_encoder_layers": 1,
    "latent_dim": 8,
}
TINY_DIFFUSION: dict[str, Any] = {
    "n_obs_steps": 2,
    "horizon": 8,
    "n_action_steps": 4,
    "down_dims": [16, 32],
    "n_groups": 4,
    "kernel_size": 3,
    "diffusion_step_embed_dim": 16,
    "spatial_softmax_num_keypoints": 4,
    "num_train_timesteps": 20,
    "num_inference_steps": 4,
}
TINY = {"act": TINY_ACT, "diffusion": TINY_DIFFUSION}
# Inputs without the camera: no ResNet, so loop tests (seeding, resume, CLI) run in seconds.
VECTOR_INPUTS = ["observation.state", "observation.environment_state"]


@pytest.fixture(autouse=True)
def _threads() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def write_dataset(
    root: Path,
    *,
    episodes: int = 4,
    frames: int = 12,
    camera: str = "video",
    image_shape: tuple[int, int, int] = IMAGE_SHAPE,
    contract: dict[str, Any] | None = None,
    extra_cameras: dict[str, tuple[int, int, int]] | None = None,
) -> Path:
    """A dataset whose action is a smooth function of the state and the camera shows the state (learnable).

    `extra_cameras` adds cameras (name -> (H, W, 3)) that show the same picture at their own size.
    """
    extra_cameras = extra_cameras or {}
    features = {
        "observation.state": FeatureSpec("float32", (3,), STATE_NAMES),
        "observation.images.front": FeatureSpec(camera, image_shape),
        **{f"observation.images.{name}": FeatureSpec(camera, shape) for name, shape in extra_cameras.items()},
        "observation.environment_state": FeatureSpec("float32", (2,), ["target_x", "target_y"]),
        "action": FeatureSpec("float32", (3,), STATE_NAMES),
    }
    with DatasetWriter.create(
        root, repo_id="local/tiny", fps=10, features=features, video_codec="h264", robot_type="so101_follower",
        contract=contract,
    ) as writer:  # fmt: skip
        for episode in range(episodes):
            writer.start_episode("move")
            for frame in range(frames):
                phase = frame / frames * 2 * np.pi + episode
                state = np.array([np.sin(phase), np.cos(phase), 10.0 * episode + frame], dtype=np.float32)
                image = np.zeros(image_shape, dtype=np.uint8)
                image[:, : int((frame + 1) / frames * image_shape[1])] = 40 + 50 * (episode % 4)
                extra = {}
                for name, shape in extra_cameras.items():
                    other = np.zeros(shape, dtype=np.uint8)
                    other[: int((frame + 1) / frames * shape[0])] = 200 - 40 * (episode % 4)
                    extra[f"observation.images.{name}"] = other
                writer.add_frame(
                    {
                        **extra,
                        "observation.state": state,
                        "observation.images.front": image,
                        "observation.environment_state": np.array([episode, np.sin(phase)], dtype=np.float32),
                        "action": np.array([np.sin(phase + 0.3), np.cos(phase + 0.3), state[2] + 1], dtype=np.float32),
                    }
                )
            writer.save_episode()
    return root


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 episodes x 12 frames, 32x48 h264 camera; shared by the tests that only read it."""
    return write_dataset(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture
def make_dataset(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(100))

    def make(**kwargs: Any) -> Path:
        return write_dataset(tmp_path / f"ds{next(counter)}", **kwargs)

    return make
