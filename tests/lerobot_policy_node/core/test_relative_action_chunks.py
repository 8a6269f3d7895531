"""A checkpoint trained with relative actions runs behind the policy node's interface as absolute targets: each
chunk is the model's offsets plus the state of the observation that chunk was computed from (issue #19 item 1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lerobot_policy_node.core.policies import CheckpointPolicy
from lerobot_training.checkpoint import save_policy
from lerobot_training.errors import CheckpointError
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.act import ACTConfig, ACTPolicy
from lerobot_training.relative_actions import RelativeActions

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
NAMES = tuple(f"{j}.pos" for j in JOINTS)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (6,), NAMES),
        "observation.environment_state": PolicyFeature(FeatureType.ENV, (2,), ("block_x", "block_y")),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,), NAMES)}
    config = ACTConfig(
        input_features=inputs, output_features=outputs, chunk_size=5, n_action_steps=5, dim_model=32, n_heads=2,
        dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=8,
        use_vae=False,
    )  # fmt: skip
    stats = {key: {"mean": torch.zeros(6), "std": torch.full((6,), 5.0)} for key in ("observation.state", "action")}
    stats["observation.environment_state"] = {"mean": torch.zeros(2), "std": torch.ones(2)}
    policy = ACTPolicy(config, stats)
    policy.relative_actions = RelativeActions.choose(NAMES, NAMES)  # every joint but the gripper
    directory = tmp_path_factory.mktemp("ckpt") / "pretrained_model"
    save_policy(directory, policy, fps=30)
    return directory


def observation(state):
    return {
        "observation.state": np.asarray(state, dtype=np.float32),
        "observation.environment_state": np.asarray([0.1, -0.2], dtype=np.float32),
        "timestamp": 0.0,
        "task": "",
    }


def model_offsets(policy: CheckpointPolicy, obs) -> np.ndarray:
    model = policy._policy
    with torch.inference_mode():
        raw = model.predict_chunk_batch(model.prepare_observation({k: obs[k] for k in model.config.input_features}))
    return raw[0].numpy().astype(np.float64)


def test_chunk_is_the_offsets_plus_the_state_of_its_own_observation(checkpoint) -> None:
    policy = CheckpointPolicy(checkpoint)
    assert policy.relative_joints == NAMES[:5]
    for state in ([10.0, -20.0, 30.0, 5.0, 0.0, 40.0], [-45.0, 12.5, 80.0, -5.0, 90.0, 2.0]):
        obs = observation(state)
        chunk = policy.predict_chunk(obs)
        offsets = model_offsets(policy, obs)
        assert np.allclose(chunk[:, :5], offsets[:, :5] + np.asarray(state[:5]), atol=1e-4)
        assert np.allclose(chunk[:, 5], offsets[:, 5], atol=1e-5)  # the gripper stays absolute


def test_a_batch_of_observations_gets_each_ones_own_state(checkpoint) -> None:
    policy = CheckpointPolicy(checkpoint)
    if not hasattr(policy, "predict_chunks"):
        pytest.skip("CheckpointPolicy.predict_chunks (batched evaluation) is not in this tree")
    states = [[10.0, -20.0, 30.0, 5.0, 0.0, 40.0], [-45.0, 12.5, 80.0, -5.0, 90.0, 2.0]]
    batched = policy.predict_chunks([observation(s) for s in states])
    for state, chunk in zip(states, batched, strict=True):
        assert np.allclose(chunk, policy.predict_chunk(observation(state)), atol=1e-4)


def test_a_checkpoint_whose_relative_state_is_not_an_input_is_refused(checkpoint, tmp_path) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    meta = json.loads((broken / "lerobot_ros.json").read_text())
    meta["relative_actions"]["state_key"] = "observation.images.front"
    (broken / "lerobot_ros.json").write_text(json.dumps(meta))
    from lerobot_training.checkpoint import load_policy

    with pytest.raises(CheckpointError, match="not among its inputs"):
        load_policy(broken)
