"""DDPM / DDIM noise schedules and sampler steps (Ho et al. 2020; Song et al. 2021), in plain torch.

The maths follows the `diffusers` schedulers LeRobot's diffusion policy uses (squared-cosine or linear
betas, epsilon or sample prediction, sample clipping, "leading" timestep spacing, DDIM with eta = 0
and the final alpha set to one, DDPM with the "fixed_small" variance).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def make_betas(schedule: str, num_train_timesteps: int, beta_start: float, beta_end: float) -> Tensor:
    """Noise variances β_t: `linear`, `scaled_linear` or `squaredcos_cap_v2` (Nichol & Dhariwal)."""
    if schedule == "linear":
        return torch.linspace(beta_start, beta_end, num_train_timesteps, dtype=torch.float32)
    if schedule == "scaled_linear":
        return torch.linspace(beta_start**0.5, beta_end**0.5, num_train_timesteps, dtype=torch.float32) ** 2
    if schedule == "squaredcos_cap_v2":

        def alpha_bar(t: float) -> float:
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

        betas = [
            min(1 - alpha_bar((i + 1) / num_train_timesteps) / alpha_bar(i / num_train_timesteps), 0.999)
            for i in range(num_train_timesteps)
        ]
        return torch.tensor(betas, dtype=torch.float32)
    raise ValueError(f"unknown beta_schedule {schedule!r}; use linear, scaled_linear or squaredcos_cap_v2")


class NoiseScheduler:
    """Forward noising for training and the reverse step of DDPM or DDIM for sampling."""

    def __init__(
        self,
        kind: str,
        num_train_timesteps: int,
        beta_schedule: str,
        beta_start: float,
        beta_end: float,
        prediction_type: str,
        clip_sample: bool,
        clip_sample_range: float,
    ) -> None:
        if kind not in ("DDPM", "DDIM"):
            raise ValueError(f"noise_scheduler_type must be DDPM or DDIM, got {kind!r}")
        if prediction_type not in ("epsilon", "sample"):
            raise ValueError(f"prediction_type must be epsilon or sample, got {prediction_type!r}")
        self.kind = kind
        self.num_train_timesteps = num_train_timesteps
        self.prediction_type = prediction_type
        self.clip_sample = clip_sample
        self.clip_sample_range = clip_sample_range
        self.betas = make_betas(beta_schedule, num_train_timesteps, beta_start, beta_end)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)

    def add_noise(self, sample: Tensor, noise: Tensor, timesteps: Tensor) -> Tensor:
        """x_t = sqrt(ᾱ_t)·x_0 + sqrt(1 - ᾱ_t)·ε for a (B, ...) batch and (B,) timesteps."""
        alphas = self.alphas_cumprod.to(sample.device)[timesteps].to(sample.dtype)
        shape = (-1,) + (1,) * (sample.dim() - 1)
        return alphas.sqrt().view(shape) * sample + (1 - alphas).sqrt().view(shape) * noise

    def timesteps(self, num_inference_steps: int) -> list[int]:
        """Descending timesteps visited by the sampler ("leading" spacing)."""
        if not 1 <= num_inference_steps <= self.num_train_timesteps:
            raise ValueError(
                f"num_inference_steps must be in [1, {self.num_train_timesteps}], got {num_inference_steps}"
            )
        ratio = self.num_train_timesteps // num_inference_steps
        return [i * ratio for i in reversed(range(num_inference_steps))]

    def original_sample(self, model_output: Tensor, sample: Tensor, t: int) -> Tensor:
        """The network's estimate of x_0 at step t, unclipped (differentiable in `sample`)."""
        alpha_prod = self.alphas_cumprod.to(sample.device)[t]
        if self.prediction_type == "epsilon":
            return (sample - (1 - alpha_prod).sqrt() * model_output) / alpha_prod.sqrt()
        return model_output

    def _original_sample(self, model_output: Tensor, sample: Tensor, alpha_prod: Tensor) -> tuple[Tensor, Tensor]:
        if self.prediction_type == "epsilon":
            x0 = (sample - (1 - alpha_prod).sqrt() * model_output) / alpha_prod.sqrt()
            eps = model_output
        else:
            x0 = model_output
            eps = (sample - alpha_prod.sqrt() * x0) / (1 - alpha_prod).sqrt()
        if self.clip_sample:
            x0 = x0.clamp(-self.clip_sample_range, self.clip_sample_range)
        return x0, eps

    def step(
        self, model_output: Tensor, t: int, sample: Tensor, num_inference_steps: int, generator: torch.Generator | None
    ) -> Tensor:
        """x_{t_prev} from x_t and the network's output at t."""
        alpha_prod = self.alphas_cumprod.to(sample.device)[t]
        x0, eps = self._original_sample(model_output, sample, alpha_prod)
        return self._step(x0, eps, t, sample, num_inference_steps, generator)

    def step_from_original(
        self, x0: Tensor, t: int, sample: Tensor, num_inference_steps: int, generator: torch.Generator | None
    ) -> Tensor:
        """x_{t_prev} from x_t and an (unclipped) estimate of x_0, e.g. a guided one: the noise is the one that
        makes x_t from that x_0, so the step follows the guided score."""
        alpha_prod = self.alphas_cumprod.to(sample.device)[t]
        eps = (sample - alpha_prod.sqrt() * x0) / (1 - alpha_prod).sqrt()
        if self.clip_sample:
            x0 = x0.clamp(-self.clip_sample_range, self.clip_sample_range)
        return self._step(x0, eps, t, sample, num_inference_steps, generator)

    def _step(
        self,
        x0: Tensor,
        eps: Tensor,
        t: int,
        sample: Tensor,
        num_inference_steps: int,
        generator: torch.Generator | None,
    ) -> Tensor:
        ratio = self.num_train_timesteps // num_inference_steps
        prev_t = t - ratio
        alphas_cumprod = self.alphas_cumprod.to(sample.device)
        alpha_prod = alphas_cumprod[t]
        alpha_prod_prev = alphas_cumprod[prev_t] if prev_t >= 0 else torch.ones((), device=sample.device)
        if self.kind == "DDIM":  # deterministic (eta = 0)
            return alpha_prod_prev.sqrt() * x0 + (1 - alpha_prod_prev).sqrt() * eps
        beta_prod = 1 - alpha_prod
        current_alpha = alpha_prod / alpha_prod_prev
        current_beta = 1 - current_alpha
        mean = (alpha_prod_prev.sqrt() * current_beta / beta_prod) * x0 + (
            current_alpha.sqrt() * (1 - alpha_prod_prev) / beta_prod
        ) * sample
        if t == 0:
            return mean
        variance = ((1 - alpha_prod_prev) / beta_prod * current_beta).clamp(min=1e-20)
        noise = torch.randn(sample.shape, generator=generator, device=sample.device, dtype=sample.dtype)
        return mean + variance.sqrt() * noise
