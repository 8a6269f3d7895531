"""Real-time chunking on the node side: the previous chunk's remaining steps, the delay, and what the policy gets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import PolicyConfigError
from lerobot_policy_node.core.policies import CheckpointPolicy, ScriptedPolicy
from lerobot_policy_node.core.rtc import (
    ChunkPrefix,
    RtcSettings,
    make_prefix,
    measured_delay_steps,
    remaining_steps,
)
from lerobot_training.checkpoint import save_policy
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.act import ACTConfig, ACTPolicy
from lerobot_training.policies.diffusion import DiffusionConfig, DiffusionPolicy

PERIOD = NS // 30
NAMES = ("a.pos", "b.pos")


def test_remaining_steps_start_at_the_observation_on_the_chunk_grid():
    actions = np.stack([np.arange(10.0), -np.arange(10.0)], axis=1)  # step k at 1 s + k * PERIOD
    rest = remaining_steps(actions, NS, PERIOD, NS + 4 * PERIOD)
    assert rest.tolist() == actions[4:].tolist()
    between = remaining_steps(actions, NS, PERIOD, NS + 4 * PERIOD + PERIOD // 2)
    assert between[0] == pytest.approx([4.5, -4.5], abs=1e-6) and len(between) == 5
    assert len(remaining_steps(actions, NS, PERIOD, NS + 10 * PERIOD)) == 0


def test_measured_delay_counts_the_steps_run_during_the_inference():
    # Observation 10 ms old, inference expected 0.2 s, margin 30 ms: 0.24 s at 30 Hz is 7.2 -> 8 steps.
    assert measured_delay_steps(0.01, 0.2, 0.03, PERIOD) == 8
    assert measured_delay_steps(0.0, 0.0, 0.0, PERIOD) == 0


def test_prefix_uses_the_override_and_never_freezes_more_than_is_left():
    previous = np.zeros((6, 2))
    measured = make_prefix(RtcSettings(), previous, horizon=16, measured_delay=3)
    assert measured is not None and measured.inference_delay == 3
    assert measured.execution_horizon == 10  # 16 - 6: the overlap is everything the previous chunk has left
    fixed = make_prefix(RtcSettings(inference_delay=9, execution_horizon=4), previous, horizon=16, measured_delay=3)
    assert fixed is not None and (fixed.inference_delay, fixed.execution_horizon) == (6, 4)
    assert make_prefix(RtcSettings(), np.zeros((0, 2)), horizon=16, measured_delay=3) is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"inference_delay": -2}, "rtc_inference_delay"), ({"execution_horizon": 0}, "rtc_execution_horizon"),
     ({"max_guidance_weight": 0.0}, "rtc_max_guidance_weight"), ({"start_noise_level": 0.0}, "rtc_start_noise_level")],
)  # fmt: skip
def test_settings_name_the_bad_parameter(kwargs, field):
    with pytest.raises(PolicyConfigError, match=field):
        RtcSettings(**kwargs)


def _save(policy, tmp_path):
    directory = tmp_path / "pretrained_model"
    save_policy(directory, policy, fps=30)
    return directory


def _inputs():
    return {
        "observation.state": PolicyFeature(FeatureType.STATE, (2,), NAMES),
        "observation.environment_state": PolicyFeature(FeatureType.ENV, (1,)),
    }


def _stats():
    span = {"min": -torch.ones(2) * 3, "max": torch.ones(2) * 3, "mean": torch.zeros(2), "std": torch.ones(2)}
    env = {"min": torch.zeros(1), "max": torch.ones(1), "mean": torch.zeros(1), "std": torch.ones(1)}
    return {"observation.state": span, "action": span, "observation.environment_state": env}


def test_a_diffusion_checkpoint_continues_the_previous_chunk(tmp_path):
    torch.manual_seed(0)
    config = DiffusionConfig(
        input_features=_inputs(), output_features={"action": PolicyFeature(FeatureType.ACTION, (2,), NAMES)},
        n_obs_steps=2, horizon=8, n_action_steps=4, down_dims=(16, 32), n_groups=4, kernel_size=3,
        diffusion_step_embed_dim=16, num_inference_steps=4,
    )  # fmt: skip
    policy = CheckpointPolicy(_save(DiffusionPolicy(config, _stats()), tmp_path))
    assert policy.can_inpaint
    observation = {"observation.state": np.array([0.5, -0.5]), "observation.environment_state": np.array([0.3])}
    previous = np.linspace([0.4, -0.6], [1.0, 0.0], 5)
    chunk = policy.predict_chunk(observation, ChunkPrefix(previous, 2, 3, 5.0))
    assert chunk.shape == (7, 2)
    assert chunk[:2] == pytest.approx(previous[:2], abs=1e-5)


def test_an_act_checkpoint_cannot_inpaint(tmp_path):
    config = ACTConfig(
        input_features=_inputs(), output_features={"action": PolicyFeature(FeatureType.ACTION, (2,), NAMES)},
        chunk_size=4, n_action_steps=4, dim_model=16, n_heads=2, dim_feedforward=32, n_encoder_layers=1,
        n_decoder_layers=1, use_vae=False,
    )  # fmt: skip
    assert not CheckpointPolicy(_save(ACTPolicy(config, _stats()), tmp_path)).can_inpaint


def test_the_scripted_policy_keeps_the_frozen_steps():
    policy = ScriptedPolicy(action_dim=2, horizon=10)
    observation = {"observation.state": np.zeros(2), "timestamp": 0.0}
    previous = np.full((4, 2), 7.0)
    chunk = policy.predict_chunk(observation, ChunkPrefix(previous, 3, 6, 5.0))
    assert chunk[:3].tolist() == [[7.0, 7.0]] * 3 and chunk[3, 0] != 7.0
