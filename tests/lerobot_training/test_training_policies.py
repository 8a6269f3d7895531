"""Policies on random tensors: shapes, gradient flow into every parameter, interface errors."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from conftest import TINY_ACT, TINY_DIFFUSION

from lerobot_training.errors import FeatureMismatchError, PolicyConfigError
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.act import ACTConfig, ACTPolicy, ACTTemporalEnsembler
from lerobot_training.policies.base import Policy
from lerobot_training.policies.diffusion import DiffusionConfig, DiffusionPolicy
from lerobot_training.policies.noise_schedulers import NoiseScheduler

STATE, ACTION_DIM, IMAGE = 3, 2, (3, 32, 40)


def features(cameras: int = 1, env: bool = False) -> tuple[dict[str, PolicyFeature], dict[str, PolicyFeature]]:
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (STATE,))}
    for i in range(cameras):
        inputs[f"observation.images.cam{i}"] = PolicyFeature(FeatureType.VISUAL, IMAGE)
    if env:
        inputs["observation.environment_state"] = PolicyFeature(FeatureType.ENV, (5,))
    return inputs, {"action": PolicyFeature(FeatureType.ACTION, (ACTION_DIM,))}


def stats_for(policy_inputs: dict[str, PolicyFeature]) -> dict[str, dict[str, torch.Tensor]]:
    out = {}
    for key, ft in {**policy_inputs, "action": PolicyFeature(FeatureType.ACTION, (ACTION_DIM,))}.items():
        shape = (3, 1, 1) if ft.type is FeatureType.VISUAL else ft.shape
        out[key] = {"mean": torch.full(shape, 0.2), "std": torch.full(shape, 2.0),
                    "min": torch.full(shape, -3.0), "max": torch.full(shape, 4.0)}  # fmt: skip
    return out


def make_act(cameras: int = 1, env: bool = False, **overrides: Any) -> ACTPolicy:
    inputs, outputs = features(cameras, env)
    config = ACTConfig(input_features=inputs, output_features=outputs, **{**TINY_ACT, **overrides})
    return ACTPolicy(config, stats_for(inputs))


def make_diffusion(cameras: int = 1, **overrides: Any) -> DiffusionPolicy:
    inputs, outputs = features(cameras)
    config = DiffusionConfig(
        input_features=inputs, output_features=outputs, **{**TINY_DIFFUSION, "down_dims": (16, 32), **overrides}
    )
    return DiffusionPolicy(config, stats_for(inputs))


def training_batch(policy: Policy, batch_size: int = 3) -> dict[str, torch.Tensor]:
    config = policy.config
    steps = config.n_obs_steps
    lead = (batch_size, steps) if steps > 1 else (batch_size,)
    batch = {key: torch.rand(*lead, *ft.shape) for key, ft in config.input_features.items()}
    horizon = len(config.action_delta_indices)
    batch["action"] = torch.randn(batch_size, horizon, ACTION_DIM)
    pad = torch.zeros(batch_size, horizon, dtype=torch.bool)
    pad[0, -2:] = True
    batch["action_is_pad"] = pad
    return batch


# ACT's decoder input is all zeros (DETR-style queries live in the position embedding), so in LeRobot's
# architecture the first decoder self-attention sees identical values at every position and its q/k/v
# input weights never get a non-zero gradient; with pre_norm its norm1 scale normalises that zero input and
# is dead as well. (At initialisation, with zero biases, a few tensors after
# it get exact zeros too, hence the check after one optimiser step.)
# Without the CVAE the latent is all zeros, so its input projection's weight is dead too.
def structural_zero_gradients(policy: Policy) -> set[str]:
    config = policy.config
    if not isinstance(config, ACTConfig):
        return set()
    dead = {"model.decoder.layers.0.self_attn.in_proj_weight"}
    if config.pre_norm:
        dead.add("model.decoder.layers.0.norm1.weight")
    if not config.use_vae:
        dead.add("model.encoder_latent_input_proj.weight")
    return dead


def assert_every_parameter_gets_gradient(policy: Policy) -> None:
    policy.train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    loss, logs = policy.compute_loss(training_batch(policy))
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert logs
    loss.backward()
    without = [name for name, p in policy.named_parameters() if p.requires_grad and p.grad is None]
    assert without == []
    optimizer.step()
    optimizer.zero_grad()
    policy.compute_loss(training_batch(policy))[0].backward()
    zero = {name for name, p in policy.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0}
    assert zero <= structural_zero_gradients(policy)


@pytest.mark.parametrize(
    "build",
    [
        make_act,
        lambda: make_act(cameras=2, env=True),
        lambda: make_act(pre_norm=True),
        make_diffusion,
        lambda: make_diffusion(cameras=2, use_separate_rgb_encoder_per_camera=True),
        lambda: make_diffusion(crop_shape=[32, 36], prediction_type="sample", noise_scheduler_type="DDPM"),
    ],
    ids=["act", "act-2cam-env", "act-prenorm", "diffusion", "diffusion-2cam-separate", "diffusion-crop-ddpm"],
)
def test_every_parameter_gets_a_gradient(build: Any) -> None:
    torch.manual_seed(0)
    assert_every_parameter_gets_gradient(build())


def test_act_without_vae_has_no_vae_encoder_and_trains() -> None:
    torch.manual_seed(0)
    policy = make_act(use_vae=False)
    assert not any(name.startswith("model.vae_encoder") for name, _ in policy.named_parameters())
    assert_every_parameter_gets_gradient(policy)


def test_act_padding_is_masked_out_of_the_loss() -> None:
    torch.manual_seed(0)
    policy = make_act(use_vae=False, dropout=0.0)
    batch = training_batch(policy)
    batch["action_is_pad"][:] = False
    batch["action_is_pad"][:, -1] = True
    loss_a, _ = policy.compute_loss(batch)
    batch["action"][:, -1] += 100.0
    loss_b, _ = policy.compute_loss(batch)
    assert torch.allclose(loss_a, loss_b)


@pytest.mark.parametrize("build", [make_act, make_diffusion], ids=["act", "diffusion"])
def test_predict_chunk_shape_and_units(build: Any) -> None:
    torch.manual_seed(0)
    policy = build()
    observation = {
        "observation.state": torch.zeros(STATE),
        "observation.images.cam0": torch.zeros(IMAGE[1], IMAGE[2], 3, dtype=torch.uint8),  # as a ROS image
    }
    chunk = policy.predict_chunk(observation)
    assert chunk.shape == (policy.config.chunk_length, ACTION_DIM)
    float_chunk_input = {**observation, "observation.images.cam0": torch.zeros(IMAGE)}
    assert policy.predict_chunk(float_chunk_input).shape == chunk.shape
    policy.reset()
    assert policy.select_action(observation).shape == (ACTION_DIM,)


def test_diffusion_chunk_starts_at_the_current_step() -> None:
    policy = make_diffusion()
    assert policy.config.chunk_length == TINY_DIFFUSION["horizon"] - TINY_DIFFUSION["n_obs_steps"] + 1
    assert policy.config.action_delta_indices[0] == 1 - TINY_DIFFUSION["n_obs_steps"]


def test_predict_chunk_names_wrong_image_size_and_missing_feature() -> None:
    policy = make_act()
    good = {
        "observation.state": torch.zeros(STATE),
        "observation.images.cam0": torch.zeros(32, 40, 3, dtype=torch.uint8),
    }
    with pytest.raises(FeatureMismatchError, match=r"observation.images.cam0.*\(3, 48, 64\).*\(3, 32, 40\)"):
        policy.predict_chunk({**good, "observation.images.cam0": torch.zeros(48, 64, 3, dtype=torch.uint8)})
    with pytest.raises(FeatureMismatchError, match=r"lacks 'observation\.state'"):
        policy.predict_chunk({"observation.images.cam0": good["observation.images.cam0"]})


def test_config_validation_names_the_field() -> None:
    inputs, outputs = features()
    with pytest.raises(PolicyConfigError, match="n_action_steps"):
        ACTConfig(input_features=inputs, output_features=outputs, chunk_size=4, n_action_steps=5)
    with pytest.raises(PolicyConfigError, match="temporal_ensemble_coeff"):
        ACTConfig(chunk_size=4, n_action_steps=4, temporal_ensemble_coeff=0.01)
    with pytest.raises(PolicyConfigError, match="horizon"):
        DiffusionConfig(horizon=10, down_dims=(16, 32, 64), n_groups=4)
    with pytest.raises(PolicyConfigError, match="1x1 ResNet feature map"):
        make_diffusion(crop_shape=[24, 32])
    with pytest.raises(FeatureMismatchError, match="camera"):
        ACTPolicy(ACTConfig(input_features={"observation.state": inputs["observation.state"]}, output_features=outputs))


def test_temporal_ensembler_matches_offline_weighted_average() -> None:
    coeff, chunk = 0.1, 4
    ensembler = ACTTemporalEnsembler(coeff, chunk)
    chunks = [torch.randn(chunk, 2) for _ in range(6)]
    outputs = [ensembler.update(c) for c in chunks]
    # the action for step t averages chunk[t - i][i] for every chunk i steps old that covers t; oldest weight exp(0)
    for t in range(len(chunks)):
        predictions = [chunks[s][t - s] for s in range(max(0, t - chunk + 1), t + 1)]
        weights = torch.exp(-coeff * torch.arange(len(predictions), dtype=torch.float32))
        expected = sum(w * p for w, p in zip(weights, predictions, strict=True)) / weights.sum()
        assert torch.allclose(outputs[t], expected, atol=1e-5)


def test_act_with_temporal_ensembling_runs_every_step() -> None:
    policy = make_act(n_action_steps=1, temporal_ensemble_coeff=0.01)
    observation = {"observation.state": torch.zeros(STATE), "observation.images.cam0": torch.zeros(IMAGE)}
    policy.reset()
    actions = [policy.select_action(observation) for _ in range(3)]
    assert all(a.shape == (ACTION_DIM,) for a in actions)


@pytest.mark.parametrize("kind", ["DDIM", "DDPM"])
def test_sampler_with_an_exact_noise_predictor_recovers_the_sample(kind: str) -> None:
    scheduler = NoiseScheduler(kind, 50, "squaredcos_cap_v2", 1e-4, 0.02, "epsilon", True, 1.0)
    target = torch.rand(2, 8, 3) * 1.6 - 0.8
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 3, generator=generator)
    steps = 10
    for t in scheduler.timesteps(steps):
        alpha = scheduler.alphas_cumprod[t]
        eps = (x - alpha.sqrt() * target) / (1 - alpha).sqrt()  # the noise that makes x from target
        x = scheduler.step(eps, t, x, steps, generator)
    assert torch.allclose(x, target, atol=1e-4)


def test_add_noise_matches_the_closed_form() -> None:
    scheduler = NoiseScheduler("DDPM", 100, "linear", 1e-4, 0.02, "epsilon", True, 1.0)
    sample, noise = torch.ones(2, 4, 1), torch.zeros(2, 4, 1)
    noisy = scheduler.add_noise(sample, noise, torch.tensor([0, 99]))
    assert torch.allclose(noisy[:, 0, 0], scheduler.alphas_cumprod[[0, 99]].sqrt())


@pytest.mark.parametrize("cameras", [1, 2])
def test_separate_rgb_encoders_are_named_as_lerobot_names_them(cameras: int) -> None:
    """With use_separate_rgb_encoder_per_camera (LeRobot 0.6's default) LeRobot keeps a list of encoders, one a
    camera, also for a single camera (`diffusion.rgb_encoder.0.backbone...`): a checkpoint it writes loads here."""
    separate = make_diffusion(cameras=cameras, use_separate_rgb_encoder_per_camera=True).state_dict()
    assert any(key.startswith("diffusion.rgb_encoder.0.backbone.") for key in separate), sorted(separate)[:5]
    assert not any(key.startswith(f"diffusion.rgb_encoder.{cameras}.") for key in separate)
    shared = make_diffusion(cameras=cameras).state_dict()
    assert any(key.startswith("diffusion.rgb_encoder.backbone.") for key in shared), sorted(shared)[:5]
