"""A checkpoint written by LeRobot 0.4.4's own `lerobot-train` loads here and predicts what LeRobot predicts.

Runs LeRobot in the reference venv (.venv-lerobot-ref) with the extra training packages of
shared/lerobot-act-train-requirements.txt installed `--no-deps --target .venv-lerobot-ref/act-extras`;
skipped when either is absent.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from lerobot_training.checkpoint import load_policy

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REF_VENV = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", REPO / ".venv-lerobot-ref"))
REF_PYTHON = REF_VENV / "bin" / "python"
EXTRAS = Path(os.environ.get("LEROBOT_ROS_ACT_EXTRAS", REF_VENV / "act-extras"))

pytestmark = [
    pytest.mark.reference,
    pytest.mark.slow,
    pytest.mark.skipif(
        not REF_PYTHON.exists() or not (EXTRAS / "draccus").is_dir(),
        reason="needs .venv-lerobot-ref (scripts/setup.sh --with-lerobot-reference) and the ACT training extras: "
        "pip install --no-deps --target .venv-lerobot-ref/act-extras -r shared/lerobot-act-train-requirements.txt",
    ),
]


def reference_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(
        PYTHONPATH=str(EXTRAS), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled",
        HF_HOME=str(tmp_path / "hf-home"), HF_LEROBOT_HOME=str(tmp_path / "hf-lerobot"), OMP_NUM_THREADS="1",
    )  # fmt: skip
    return env


def run_reference(tmp_path: Path, args: list[str]) -> None:
    result = subprocess.run(
        [str(REF_PYTHON), *args], env=reference_env(tmp_path), capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, f"{args[:3]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def test_lerobot_trained_act_checkpoint_loads_and_matches_lerobots_prediction(
    make_dataset: Callable[..., Path], tmp_path: Path
) -> None:
    dataset = make_dataset(episodes=2, frames=10, image_shape=(64, 96, 3))
    out = tmp_path / "lerobot-run"
    run_reference(
        tmp_path,
        [
            "-m", "lerobot.scripts.lerobot_train", "--policy.type=act", "--policy.device=cpu",
            "--policy.push_to_hub=false", "--policy.pretrained_backbone_weights=null", "--policy.dim_model=64",
            "--policy.n_heads=4", "--policy.dim_feedforward=128", "--policy.n_encoder_layers=2",
            "--policy.n_vae_encoder_layers=1", "--policy.chunk_size=5", "--policy.n_action_steps=5",
            "--policy.latent_dim=8", "--dataset.repo_id=local/tiny", f"--dataset.root={dataset}",
            f"--output_dir={out}", "--steps=2", "--batch_size=2", "--seed=1000", "--num_workers=0", "--save_freq=2",
            "--eval_freq=0", "--wandb.enable=false",
        ],
    )  # fmt: skip
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    loaded = load_policy(checkpoint)
    assert loaded.source == "lerobot"
    config = loaded.policy.config
    assert config.chunk_size == 5 and config.dim_model == 64
    assert set(config.input_features) == {
        "observation.state",
        "observation.images.front",
        "observation.environment_state",
    }

    generator = torch.Generator().manual_seed(0)
    observation = {
        "observation.state": torch.randn(3, generator=generator),
        "observation.environment_state": torch.randn(2, generator=generator),
        "observation.images.front": torch.rand(3, 64, 96, generator=generator),
    }
    np.savez(tmp_path / "observation.npz", **{k: v.numpy() for k, v in observation.items()})
    run_reference(
        tmp_path,
        [
            str(HERE / "lerobot_act_predict.py"),
            str(checkpoint),
            str(tmp_path / "observation.npz"),
            str(tmp_path / "ref.npz"),
        ],
    )
    expected = np.load(tmp_path / "ref.npz")["chunk"]
    ours = loaded.policy.predict_chunk(observation).numpy()
    assert ours.shape == expected.shape == (5, 3)
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
