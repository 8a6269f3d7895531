"""`lerobot-ros policy-server` in this project's venv (no LeRobot): a checkpoint trained here is served by
lerobot_training, and the served chunk is the one the checkpoint predicts in-process."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import write_so101_dataset

from lerobot_policy_server.client import PolicyClient
from lerobot_ros.testing import venv_script
from lerobot_training.checkpoint import load_policy
from lerobot_training.trainer import TrainConfig, Trainer

TINY_ACT = {"chunk_size": 6, "n_action_steps": 6, "dim_model": 32, "n_heads": 2, "dim_feedforward": 64,
            "n_encoder_layers": 1, "n_decoder_layers": 1, "n_vae_encoder_layers": 1, "latent_dim": 8}  # fmt: skip


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("own")
    dataset = write_so101_dataset(tmp / "data")
    trainer = Trainer(
        TrainConfig(
            dataset=dataset, policy="act", out=tmp / "run", steps=2, batch_size=2, save_every=2, val_every=2,
            val_batches=1, warmup_steps=1, progress=False, policy_overrides=TINY_ACT,
        )
    )  # fmt: skip
    trainer.train()
    return tmp / "run" / "checkpoints" / "last" / "pretrained_model"


def test_our_checkpoint_is_served_by_lerobot_training_and_predicts_our_chunk(checkpoint, processes) -> None:
    server = processes.start(
        [venv_script("lerobot-ros"), "policy-server", str(checkpoint), "--port", "0", "--host", "127.0.0.1"],
        name="server",
    )
    port = int(server.wait_for_output(r"serving act \(lerobot_training, cpu\) .* on 127\.0\.0\.1:(\d+);", 120)[1])
    with PolicyClient(f"grpc://127.0.0.1:{port}", timeout_s=60) as client:
        info = client.info()
        assert info.backend == "lerobot_training" and info.fps == 30.0 and info.horizon == 6
        assert (info.name, info.versions) == ("pretrained_model", {})  # no path, no library versions
        assert info.action_names == ("shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos",
                                     "wrist_roll.pos", "gripper.pos")  # fmt: skip
        rng = np.random.default_rng(0)
        observation = {s.key: rng.normal(size=s.shape).astype(np.float32) for s in info.inputs}
        reply = client.predict(observation, stamp_ns=5, task="pick the block")
    loaded = load_policy(checkpoint)
    with torch.inference_mode():
        expected = loaded.policy.predict_chunk(observation).numpy()
    np.testing.assert_allclose(reply.actions, expected, rtol=1e-6, atol=1e-6)


def test_a_directory_without_a_checkpoint_is_one_line(tmp_path, processes) -> None:
    server = processes.start([venv_script("lerobot-ros"), "policy-server", str(tmp_path), "--port", "0"], name="bad")
    assert server.wait(60) == 2
    assert server.output().strip().splitlines()[-1] == (
        f"policy-server: error: {tmp_path}: not a checkpoint directory (no config.json)"
    )
