"""Real-time chunking on the diffusion policy's sampler.

The U-Net is replaced by the exact noise predictor of a known two-mode action distribution (from the observed
state, the arm moves at constant speed up, or down), so the sampler and its guidance are tested without a
training run: plain sampling picks either mode, a chunk that continues a previous one must keep its mode.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from lerobot_training.errors import PolicyConfigError
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.act import ACTConfig, ACTPolicy
from lerobot_training.policies.diffusion import DiffusionConfig, DiffusionPolicy
from lerobot_training.policies.noise_schedulers import NoiseScheduler
from lerobot_training.policies.rtc import RtcPrefix, prefix_weights

ACTION_DIM, HORIZON, SLOPE, SPREAD = 2, 16, 0.04, 1e-3


class TwoModeDenoiser(nn.Module):
    """Exact epsilon for x_0 ~ 1/2 N(state + k*SLOPE*u, SPREAD^2) + 1/2 N(state - k*SLOPE*u, SPREAD^2) (normalised
    units, state = the first ACTION_DIM values of the global condition, u = (1, 0.5))."""

    def __init__(self, scheduler: NoiseScheduler) -> None:
        super().__init__()
        self.scheduler = scheduler
        self.anchor = nn.Parameter(torch.zeros(()))  # the policy's device property needs a parameter

    def modes(self, global_cond: Tensor) -> Tensor:
        k = torch.arange(HORIZON, dtype=global_cond.dtype)[:, None] * torch.tensor([1.0, 0.5]) * SLOPE
        state = global_cond[:, None, :ACTION_DIM]
        return torch.stack([state + k, state - k], dim=1)  # (B, 2, T, A)

    def forward(self, x: Tensor, timestep: Tensor, global_cond: Tensor) -> Tensor:
        alpha = self.scheduler.alphas_cumprod[int(timestep[0])].to(x.dtype)
        variance = alpha * SPREAD**2 + 1 - alpha
        modes = self.modes(global_cond)
        distance = ((x[:, None] - alpha.sqrt() * modes) ** 2).flatten(2).sum(-1)
        posterior = torch.softmax(-distance / (2 * variance), dim=1)[:, :, None, None]
        per_mode = modes + alpha.sqrt() * SPREAD**2 / variance * (x[:, None] - alpha.sqrt() * modes)
        x0 = (posterior * per_mode).sum(1)
        return (x - alpha.sqrt() * x0) / (1 - alpha).sqrt()


def two_mode_policy(kind: str = "DDIM") -> DiffusionPolicy:
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (ACTION_DIM,)),
        "observation.environment_state": PolicyFeature(FeatureType.ENV, (1,)),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (ACTION_DIM,))}
    config = DiffusionConfig(
        input_features=inputs, output_features=outputs, n_obs_steps=1, horizon=HORIZON, n_action_steps=8,
        down_dims=(16, 32), n_groups=4, kernel_size=3, diffusion_step_embed_dim=16, noise_scheduler_type=kind,
    )  # fmt: skip
    span = {"min": torch.full((ACTION_DIM,), -2.0), "max": torch.full((ACTION_DIM,), 2.0)}
    stats = {"observation.state": span, "action": span,
             "observation.environment_state": {"min": torch.zeros(1), "max": torch.ones(1)}}  # fmt: skip
    policy = DiffusionPolicy(config, stats)
    policy.diffusion.unet = TwoModeDenoiser(policy.diffusion.noise_scheduler)
    return policy


def observation(state: Tensor) -> dict[str, Tensor]:
    return {"observation.state": state, "observation.environment_state": torch.tensor([0.5])}


def max_step(chunk: Tensor) -> Tensor:
    return (chunk[1:] - chunk[:-1]).abs().max(-1).values


def test_prefix_weights_follow_the_paper() -> None:
    weights = prefix_weights(inference_delay=3, execution_horizon=5, chunk_length=16, prefix_length=11)
    assert weights[:3].tolist() == [1.0, 1.0, 1.0]
    assert weights[11:].tolist() == [0.0] * 5
    decaying = weights[3:11]
    assert bool((decaying[1:] < decaying[:-1]).all()) and 0 < float(decaying[-1]) < float(decaying[0]) < 1
    c = torch.tensor(8 / 9)  # c_i = (H - s - i) / (H - s - d + 1) at i = d
    assert float(weights[3]) == pytest.approx(float(c * torch.expm1(c) / (torch.e - 1)))
    # The overlap also ends where the previous chunk does.
    assert prefix_weights(3, 2, 16, 6)[6:].abs().sum() == 0


@pytest.mark.parametrize("kind", ["DDIM", "DDPM"])
def test_a_chunk_continues_the_previous_one_without_a_seam(kind: str) -> None:
    policy = two_mode_policy(kind)
    start, executed, delay = torch.tensor([0.2, -0.4]), 5, 3
    plain_seams = 0
    for seed in range(8):
        policy.generator = torch.Generator().manual_seed(seed)
        old = policy.predict_chunk(observation(start))
        state = old[executed]  # the robot followed the old chunk for `executed` steps
        previous = old[executed:]
        policy.generator = torch.Generator().manual_seed(100 + seed)
        plain = torch.cat([previous[:delay], policy.predict_chunk(observation(state))[delay:]])
        steps = max_step(plain)
        plain_seams += float(steps[delay - 1]) > float(steps[delay:].max()) + 1e-4
        policy.generator = torch.Generator().manual_seed(100 + seed)
        new = policy.predict_chunk(observation(state), RtcPrefix(previous, inference_delay=delay, execution_horizon=5))
        # The steps that run during the inference are the old chunk's; the next one joins them without a seam.
        assert torch.allclose(new[:delay], previous[:delay], atol=1e-6)
        steps = max_step(new)
        assert float(steps[delay - 1]) <= float(steps[delay:].max()) + 1e-4, f"seed {seed}: seam {steps.tolist()}"
    # Control: without the guidance, switching to a chunk of the other mode makes a seam.
    assert plain_seams > 0


def test_rtc_on_a_policy_that_cannot_inpaint_is_one_clear_error() -> None:
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (ACTION_DIM,)),
              "observation.environment_state": PolicyFeature(FeatureType.ENV, (1,))}  # fmt: skip
    config = ACTConfig(
        input_features=inputs, output_features={"action": PolicyFeature(FeatureType.ACTION, (ACTION_DIM,))},
        chunk_size=4, n_action_steps=4, dim_model=16, n_heads=2, dim_feedforward=32, n_encoder_layers=1,
        n_decoder_layers=1, use_vae=False,
    )  # fmt: skip
    span = {"min": -torch.ones(ACTION_DIM), "max": torch.ones(ACTION_DIM),
            "mean": torch.zeros(ACTION_DIM), "std": torch.ones(ACTION_DIM)}  # fmt: skip
    env = {"min": torch.zeros(1), "max": torch.ones(1), "mean": torch.zeros(1), "std": torch.ones(1)}
    policy = ACTPolicy(config, {"observation.state": span, "action": span, "observation.environment_state": env})
    assert not ACTPolicy.supports_rtc and DiffusionPolicy.supports_rtc
    with pytest.raises(PolicyConfigError, match="act policy cannot inpaint"):
        policy.predict_chunk(observation(torch.zeros(ACTION_DIM)), RtcPrefix(torch.zeros(3, ACTION_DIM), 1, 1))


def test_bad_prefix_is_refused_with_the_field() -> None:
    with pytest.raises(PolicyConfigError, match="inference_delay"):
        RtcPrefix(torch.zeros(3, 2), -1, 1)
    with pytest.raises(PolicyConfigError, match="NaN"):
        RtcPrefix(torch.full((3, 2), float("nan")), 1, 1)


def test_a_relative_action_policy_takes_the_prefix_as_absolute_targets() -> None:
    from lerobot_training.relative_actions import RelativeActions

    policy = two_mode_policy()
    policy.relative_actions = RelativeActions(("x",), (0,), (0,), ACTION_DIM)
    state = torch.tensor([0.6, -0.2])
    previous = torch.stack([torch.linspace(0.6, 1.0, 8), torch.linspace(-0.2, 0.2, 8)], dim=1)
    policy.generator = torch.Generator().manual_seed(0)
    chunk = policy.predict_chunk(observation(state), RtcPrefix(previous, inference_delay=3, execution_horizon=8))
    # The frozen steps come back as the absolute targets handed in (offsets from the state, then the state added).
    assert torch.allclose(chunk[:3], previous[:3], atol=1e-6)


def test_a_warm_start_keeps_the_previous_chunks_mode() -> None:
    """From pure noise (the paper) the guided chunk joins without a seam but may switch modes; started from the
    previous chunk at half the noise it keeps the mode."""

    def mode_of(chunk: Tensor, state: Tensor) -> int:
        return 1 if float(chunk[-1, 0] - state[0]) > 0 else -1

    policy = two_mode_policy()
    start, executed, delay = torch.tensor([0.2, -0.4]), 5, 3
    switched = {1.0: 0, 0.5: 0}
    for seed in range(8):
        policy.generator = torch.Generator().manual_seed(seed)
        old = policy.predict_chunk(observation(start))
        state = old[executed]
        for level in switched:
            policy.generator = torch.Generator().manual_seed(100 + seed)
            prefix = RtcPrefix(old[executed:], delay, executed, start_noise_level=level)
            new = policy.predict_chunk(observation(state), prefix)
            assert torch.allclose(new[:delay], old[executed : executed + delay], atol=1e-6)
            switched[level] += mode_of(new, state) != mode_of(old, start)
    assert switched[0.5] == 0
    assert switched[1.0] > 0
