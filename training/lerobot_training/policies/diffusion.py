"""Diffusion Policy (Chi et al. 2023) as in LeRobot: ResNet-18 + spatial-softmax image encoder, a 1-D
conditional U-Net over the action horizon with FiLM conditioning, DDPM training, DDIM (or DDPM) sampling.

Field names of `DiffusionConfig` follow LeRobot's. Defaults differ in two places, for CPU training:
`crop_shape` is None (LeRobot: (84, 84)) and the sampler is DDIM with 10 steps (LeRobot: DDPM, 100).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lerobot_training.errors import FeatureMismatchError, PolicyConfigError
from lerobot_training.features import ACTION, OBS_ENV_STATE, OBS_STATE, NormalizationMode
from lerobot_training.policies.base import Batch, Policy
from lerobot_training.policies.config import PolicyConfig
from lerobot_training.policies.noise_schedulers import NoiseScheduler
from lerobot_training.policies.resnet import ResNet18Backbone, load_backbone_weights
from lerobot_training.policies.rtc import RtcPrefix, frozen_steps, prefix_weights

LEROBOT_FINAL_CONV_GROUPS = 8


@dataclass
class DiffusionConfig(PolicyConfig):
    """LeRobot's `DiffusionConfig` fields (see its docstring); `horizon` must divide by 2^(len(down_dims)-1)."""

    type: ClassVar[str] = "diffusion"

    n_obs_steps: int = 2
    horizon: int = 16
    n_action_steps: int = 8
    normalization_mapping: dict[str, NormalizationMode] = field(
        default_factory=lambda: {
            "VISUAL": NormalizationMode.MEAN_STD,
            "STATE": NormalizationMode.MIN_MAX,
            "ACTION": NormalizationMode.MIN_MAX,
        }
    )
    vision_backbone: str = "resnet18"
    crop_shape: tuple[int, int] | None = None
    crop_is_random: bool = True
    pretrained_backbone_weights: str | None = None
    use_group_norm: bool = True
    spatial_softmax_num_keypoints: int = 32
    use_separate_rgb_encoder_per_camera: bool = False
    down_dims: tuple[int, ...] = (512, 1024, 2048)
    kernel_size: int = 5
    n_groups: int = 8
    diffusion_step_embed_dim: int = 128
    use_film_scale_modulation: bool = True
    noise_scheduler_type: str = "DDIM"
    num_train_timesteps: int = 100
    beta_schedule: str = "squaredcos_cap_v2"
    beta_start: float = 0.0001
    beta_end: float = 0.02
    prediction_type: str = "epsilon"
    clip_sample: bool = True
    clip_sample_range: float = 1.0
    num_inference_steps: int | None = 10
    do_mask_loss_for_padding: bool = False
    optimizer_lr: float = 1e-4
    optimizer_weight_decay: float = 1e-6

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vision_backbone != "resnet18":
            raise PolicyConfigError(f"vision_backbone must be 'resnet18', got {self.vision_backbone!r}")
        if self.use_group_norm and self.pretrained_backbone_weights:
            raise PolicyConfigError("use_group_norm replaces the batch norms that pretrained weights need; set one")
        if not self.down_dims or any(d < 1 for d in self.down_dims):
            raise PolicyConfigError(f"down_dims must be positive channel counts, got {self.down_dims}")
        downsampling = 2 ** (len(self.down_dims) - 1)
        if self.horizon % downsampling != 0:
            raise PolicyConfigError(
                f"horizon ({self.horizon}) must be a multiple of 2^(len(down_dims)-1) = {downsampling}"
            )
        if not 1 <= self.n_action_steps <= self.horizon - self.n_obs_steps + 1:
            raise PolicyConfigError(
                f"n_action_steps must be in [1, horizon - n_obs_steps + 1 = {self.horizon - self.n_obs_steps + 1}], "
                f"got {self.n_action_steps}"
            )
        if any(d % self.n_groups for d in self.down_dims):
            raise PolicyConfigError(f"every down_dims entry must divide by n_groups={self.n_groups}: {self.down_dims}")
        if self.down_dims[0] % LEROBOT_FINAL_CONV_GROUPS:
            raise PolicyConfigError(
                f"down_dims[0] must divide by {LEROBOT_FINAL_CONV_GROUPS} (the U-Net's final block uses "
                f"{LEROBOT_FINAL_CONV_GROUPS} groups, as LeRobot's does), got {self.down_dims[0]}"
            )
        if self.noise_scheduler_type not in ("DDPM", "DDIM"):
            raise PolicyConfigError(f"noise_scheduler_type must be DDPM or DDIM, got {self.noise_scheduler_type!r}")
        if self.prediction_type not in ("epsilon", "sample"):
            raise PolicyConfigError(f"prediction_type must be epsilon or sample, got {self.prediction_type!r}")
        steps = self.num_inference_steps
        if steps is not None and not 1 <= steps <= self.num_train_timesteps:
            raise PolicyConfigError(f"num_inference_steps must be in [1, num_train_timesteps], got {steps}")
        if self.crop_shape is not None and len(self.crop_shape) != 2:
            raise PolicyConfigError(f"crop_shape must be [height, width], got {self.crop_shape}")

    def validate_features(self) -> None:
        super().validate_features()
        if not self.image_features and self.env_state_feature is None:
            raise FeatureMismatchError(
                f"the diffusion policy needs a camera (observation.images.*) or {OBS_ENV_STATE!r} among the inputs"
            )
        if self.robot_state_feature is None:
            raise FeatureMismatchError(f"the diffusion policy needs {OBS_STATE!r} among the inputs")
        for key, feature in self.image_features.items():
            if self.crop_shape is not None and (
                self.crop_shape[0] > feature.shape[1] or self.crop_shape[1] > feature.shape[2]
            ):
                raise FeatureMismatchError(
                    f"crop_shape {self.crop_shape} is larger than camera {key!r} {feature.shape[1:]}"
                )

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1 - self.n_obs_steps + self.horizon))

    @property
    def chunk_length(self) -> int:
        return self.horizon - self.n_obs_steps + 1

    @property
    def executed_steps(self) -> int:
        return self.n_action_steps


class SpatialSoftmax(nn.Module):
    """Expected (x, y) in [-1, 1] of each of `num_keypoints` softmax attention maps (Levine et al. 2016)."""

    def __init__(self, channels: int, height: int, width: int, num_keypoints: int) -> None:
        super().__init__()
        self.nets = nn.Conv2d(channels, num_keypoints, kernel_size=1)
        self.num_keypoints = num_keypoints
        xs, ys = torch.meshgrid(torch.linspace(-1, 1, width), torch.linspace(-1, 1, height), indexing="xy")
        self.register_buffer("pos_grid", torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1))

    def forward(self, features: Tensor) -> Tensor:
        maps = self.nets(features).flatten(2)  # (B, K, H*W)
        attention = F.softmax(maps, dim=-1)
        grid: Tensor = self.pos_grid  # type: ignore[assignment]
        return attention @ grid  # (B, K, 2)


class RgbEncoder(nn.Module):
    """Image -> (num_keypoints * 2) features: optional crop, ResNet-18, spatial softmax, linear + ReLU."""

    def __init__(self, config: DiffusionConfig, image_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.crop_shape = config.crop_shape
        self.crop_is_random = config.crop_is_random
        self.backbone = ResNet18Backbone(norm="group_norm" if config.use_group_norm else "frozen_batch_norm")
        height, width = config.crop_shape if config.crop_shape is not None else image_shape[1:]
        with torch.no_grad():
            feature_shape = self.backbone(torch.zeros(1, 3, height, width)).shape
        if feature_shape[2] * feature_shape[3] < 2:
            raise PolicyConfigError(
                f"camera frames of {height}x{width} (after crop_shape) give a 1x1 ResNet feature map, on which the "
                "spatial softmax is constant; use images (or crop_shape) of at least 33 pixels on one side"
            )
        self.pool = SpatialSoftmax(
            feature_shape[1], feature_shape[2], feature_shape[3], config.spatial_softmax_num_keypoints
        )
        self.feature_dim = config.spatial_softmax_num_keypoints * 2
        self.out = nn.Linear(self.feature_dim, self.feature_dim)

    def _crop(self, x: Tensor) -> Tensor:
        if self.crop_shape is None:
            return x
        height, width = self.crop_shape
        top_max, left_max = x.shape[-2] - height, x.shape[-1] - width
        if self.training and self.crop_is_random:
            top = int(torch.randint(0, top_max + 1, ()).item())
            left = int(torch.randint(0, left_max + 1, ()).item())
        else:
            top, left = top_max // 2, left_max // 2
        return x[..., top : top + height, left : left + width]

    def forward(self, x: Tensor) -> Tensor:
        keypoints = self.pool(self.backbone(self._crop(x))).flatten(1)
        out: Tensor = F.relu(self.out(keypoints))
        return out


class SinusoidalStepEmbedding(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, t: Tensor) -> Tensor:
        half = self.dim // 2
        frequencies = torch.exp(torch.arange(half, device=t.device) * -(math.log(10000) / (half - 1)))
        angles = t.float().unsqueeze(-1) * frequencies.unsqueeze(0)
        return torch.cat((angles.sin(), angles.cos()), dim=-1)


class Conv1dBlock(nn.Sequential):
    """Conv1d -> GroupNorm -> Mish."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, n_groups: int) -> None:
        super().__init__(
            nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2),
            nn.GroupNorm(n_groups, out_channels),
            nn.Mish(),
        )


class ConditionalResidualBlock1d(nn.Module):
    """Two conv blocks with FiLM conditioning (scale and bias from the condition) in between."""

    def __init__(self, in_channels: int, out_channels: int, cond_dim: int, config: DiffusionConfig) -> None:
        super().__init__()
        self.use_film_scale_modulation = config.use_film_scale_modulation
        self.out_channels = out_channels
        self.conv1 = Conv1dBlock(in_channels, out_channels, config.kernel_size, config.n_groups)
        cond_channels = out_channels * 2 if config.use_film_scale_modulation else out_channels
        self.cond_encoder = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, cond_channels))
        self.conv2 = Conv1dBlock(out_channels, out_channels, config.kernel_size, config.n_groups)
        self.residual_conv: nn.Module = (
            nn.Conv1d(in_channels, out_channels, 1) if in_channels != out_channels else nn.Identity()
        )

    def forward(self, x: Tensor, cond: Tensor) -> Tensor:
        out = self.conv1(x)
        film = self.cond_encoder(cond).unsqueeze(-1)
        if self.use_film_scale_modulation:
            out = film[:, : self.out_channels] * out + film[:, self.out_channels :]
        else:
            out = out + film
        result: Tensor = self.conv2(out) + self.residual_conv(x)
        return result


class ConditionalUnet1d(nn.Module):
    """1-D U-Net over (B, horizon, action_dim) conditioned on the diffusion step and the observations."""

    def __init__(self, config: DiffusionConfig, action_dim: int, global_cond_dim: int) -> None:
        super().__init__()
        step_dim = config.diffusion_step_embed_dim
        self.diffusion_step_encoder = nn.Sequential(
            SinusoidalStepEmbedding(step_dim),
            nn.Linear(step_dim, step_dim * 4),
            nn.Mish(),
            nn.Linear(step_dim * 4, step_dim),
        )
        cond_dim = step_dim + global_cond_dim
        dims = [action_dim, *config.down_dims]
        pairs = list(itertools.pairwise(dims))
        self.down_modules = nn.ModuleList()
        for index, (dim_in, dim_out) in enumerate(pairs):
            last = index == len(pairs) - 1
            self.down_modules.append(
                nn.ModuleList([
                    ConditionalResidualBlock1d(dim_in, dim_out, cond_dim, config),
                    ConditionalResidualBlock1d(dim_out, dim_out, cond_dim, config),
                    nn.Conv1d(dim_out, dim_out, 3, 2, 1) if not last else nn.Identity(),
                ])
            )  # fmt: skip
        mid = config.down_dims[-1]
        self.mid_modules = nn.ModuleList(
            [
                ConditionalResidualBlock1d(mid, mid, cond_dim, config),
                ConditionalResidualBlock1d(mid, mid, cond_dim, config),
            ]
        )
        self.up_modules = nn.ModuleList()
        for dim_out, dim_in in reversed(pairs[1:]):  # every up level upsamples: one per down level but the last
            self.up_modules.append(
                nn.ModuleList([
                    ConditionalResidualBlock1d(dim_in * 2, dim_out, cond_dim, config),
                    ConditionalResidualBlock1d(dim_out, dim_out, cond_dim, config),
                    nn.ConvTranspose1d(dim_out, dim_out, 4, 2, 1),
                ])
            )  # fmt: skip
        self.final_conv = nn.Sequential(
            # 8 groups whatever config.n_groups says: LeRobot's U-Net builds its final block with the default
            Conv1dBlock(config.down_dims[0], config.down_dims[0], config.kernel_size, LEROBOT_FINAL_CONV_GROUPS),
            nn.Conv1d(config.down_dims[0], action_dim, 1),
        )

    def forward(self, x: Tensor, timestep: Tensor, global_cond: Tensor) -> Tensor:
        """x: (B, T, action_dim), timestep: (B,), global_cond: (B, global_cond_dim) -> (B, T, action_dim)."""
        x = x.transpose(1, 2)
        cond = torch.cat([self.diffusion_step_encoder(timestep), global_cond], dim=-1)
        skips = []
        for level in self.down_modules:
            block1, block2, downsample = level[0], level[1], level[2]  # type: ignore[index]
            x = block2(block1(x, cond), cond)
            skips.append(x)
            x = downsample(x)
        for block in self.mid_modules:
            x = block(x, cond)
        for level in self.up_modules:
            block1, block2, upsample = level[0], level[1], level[2]  # type: ignore[index]
            x = torch.cat([x, skips.pop()], dim=1)
            x = upsample(block2(block1(x, cond), cond))
        out: Tensor = self.final_conv(x)
        return out.transpose(1, 2)


class DiffusionModel(nn.Module):
    """Observation encoder + U-Net + noise scheduler."""

    def __init__(self, config: DiffusionConfig) -> None:
        super().__init__()
        self.config = config
        state = config.robot_state_feature
        assert state is not None
        cond_per_step = state.shape[0]
        cameras = list(config.image_features)
        if cameras:
            image_shape = config.image_features[cameras[0]].shape
            count = len(cameras) if config.use_separate_rgb_encoder_per_camera else 1
            self.rgb_encoders = [RgbEncoder(config, image_shape) for _ in range(count)]
            # Separate encoders are a list even for one camera, as LeRobot keeps them (its checkpoints' names).
            separate = config.use_separate_rgb_encoder_per_camera
            self.rgb_encoder: nn.Module = nn.ModuleList(self.rgb_encoders) if separate else self.rgb_encoders[0]
            cond_per_step += self.rgb_encoders[0].feature_dim * len(cameras)
        if config.env_state_feature is not None:
            cond_per_step += config.env_state_feature.shape[0]
        self.unet = ConditionalUnet1d(config, config.action_feature.shape[0], cond_per_step * config.n_obs_steps)
        self.noise_scheduler = NoiseScheduler(
            config.noise_scheduler_type,
            config.num_train_timesteps,
            config.beta_schedule,
            config.beta_start,
            config.beta_end,
            config.prediction_type,
            config.clip_sample,
            config.clip_sample_range,
        )

    def global_condition(self, batch: Batch) -> Tensor:
        """(B, n_obs_steps * per-step features) from normalised (B, n_obs_steps, ...) observations."""
        config = self.config
        state = batch[OBS_STATE]
        batch_size, steps = state.shape[:2]
        parts = [state]
        cameras = list(config.image_features)
        if cameras:
            if isinstance(self.rgb_encoder, nn.ModuleList):
                features = [
                    encoder(batch[key].flatten(0, 1)).view(batch_size, steps, -1)
                    for encoder, key in zip(self.rgb_encoder, cameras, strict=True)
                ]
            else:
                images = torch.stack([batch[key] for key in cameras], dim=2)  # (B, T, N, C, H, W)
                encoded = self.rgb_encoder(images.flatten(0, 2))
                features = [encoded.view(batch_size, steps, -1)]
            parts.extend(features)
        if config.env_state_feature is not None:
            parts.append(batch[OBS_ENV_STATE])
        return torch.cat(parts, dim=-1).flatten(1)

    def sample(
        self,
        global_cond: Tensor,
        generator: torch.Generator | None = None,
        guide: tuple[Tensor, Tensor, float] | None = None,
        warm_start: tuple[Tensor, float] | None = None,
    ) -> Tensor:
        """Run the sampler from Gaussian noise to a normalised (B, horizon, action_dim) trajectory.

        `guide` = (target Y (B, horizon, action_dim), weights W (horizon,), max_guidance_weight beta): real-time
        chunking's guided inpainting (`rtc.py`). The paper guides a flow policy's velocity with ΠGDM (Song et al.
        2023); here the guidance acts on the diffusion sampler's estimate of the clean trajectory. At each step t,
        with x̂0(x_t) the network's estimate of x_0 (before clipping) and ᾱ_t the cumulative alpha:

        1. ΠGDM, as in the paper: x̂0 <- x̂0 + min(beta, 1/sqrt(ᾱ_t)) * (∂x̂0/∂x_t)ᵀ W (Y - x̂0), a vector-Jacobian
           product through the U-Net. This is ΠGDM's noiseless-observation guidance for a variance-preserving
           diffusion (r_t^2 = 1 - ᾱ_t): by Tweedie's formula a score correction g = Jᵀ W (Y - x̂0) / r_t^2 moves
           x̂0 by (1 - ᾱ_t)/sqrt(ᾱ_t) * g. The weight 1/sqrt(ᾱ_t) grows without bound at the noisy end of the
           schedule, as the paper's (1 - τ)/(τ r_τ^2) does at τ -> 0, and is capped at beta for the same reason.
        2. Soft-mask projection: x̂0 <- x̂0 + W ⊙ (Y - x̂0) (the frozen steps take Y, the decaying ones move
           towards it by their weight). Step 1 alone did not close the seam on our diffusion models: measured on
           a small trained model (12 seeds, d = 3 and 6), the step into the first inpainted action stayed 2-4x
           the in-chunk steps, because the sampler commits to a mode in its first, noisiest steps where the
           network's Jacobian is too small for the guidance to move it; with step 2 the seam is no larger
           than the in-chunk steps (tests/lerobot_training/test_training_rtc.py, bench/bench_rtc.py).

        The DDIM/DDPM step then continues from the guided x̂0 with the noise that makes x_t from it, i.e. along
        the guided score.

        `warm_start` = (trajectory (B, horizon, action_dim), level in (0, 1]): run only the last `level` of the
        sampler's steps, starting from that trajectory noised to the first of them (SDEdit, Meng et al. 2022).
        Not in the paper: on a bimodal task the guidance above keeps the seam small but does not stop the new
        chunk from switching modes, because the sampler picks a mode in its first, noisiest steps; starting
        from the previous chunk at a lower noise level keeps its mode (`rtc.py`).
        """
        config = self.config
        scheduler = self.noise_scheduler
        steps = config.num_inference_steps or config.num_train_timesteps
        trajectory = torch.randn(
            (global_cond.shape[0], config.horizon, config.action_feature.shape[0]),
            generator=generator,
            device=global_cond.device,
            dtype=global_cond.dtype,
        )
        timesteps = scheduler.timesteps(steps)
        if warm_start is not None:
            start, level = warm_start
            timesteps = timesteps[max(0, min(steps - 1, round(steps * (1.0 - level)))) :]
            alpha = scheduler.alphas_cumprod.to(trajectory.device)[timesteps[0]].to(trajectory.dtype)
            trajectory = alpha.sqrt() * start + (1 - alpha).sqrt() * trajectory
        for t in timesteps:
            timestep = torch.full((trajectory.shape[0],), t, dtype=torch.long, device=trajectory.device)
            if guide is None:
                output = self.unet(trajectory, timestep, global_cond)
                trajectory = scheduler.step(output, t, trajectory, steps, generator)
            else:
                x0 = self._guided_original(trajectory, timestep, global_cond, t, guide)
                trajectory = scheduler.step_from_original(x0, t, trajectory, steps, generator)
        return trajectory

    def _guided_original(
        self, trajectory: Tensor, timestep: Tensor, global_cond: Tensor, t: int, guide: tuple[Tensor, Tensor, float]
    ) -> Tensor:
        """The guided estimate of x_0 at step t (see `sample`)."""
        target, weights, max_guidance_weight = guide
        # The node runs inference under torch.inference_mode; the vector-Jacobian product needs autograd.
        with torch.inference_mode(False), torch.enable_grad():
            x = trajectory.detach().clone().requires_grad_(True)
            x0 = self.noise_scheduler.original_sample(self.unet(x, timestep, global_cond.clone()), x, t)
            error = (target.clone() - x0.detach()) * weights.clone().view(1, -1, 1)
            (correction,) = torch.autograd.grad(x0, x, grad_outputs=error)
        alpha_prod = float(self.noise_scheduler.alphas_cumprod[t])
        weight = min(max_guidance_weight, 1.0 / math.sqrt(alpha_prod))
        guided = x0.detach() + weight * correction
        mask = weights.view(1, -1, 1)
        return (guided + mask * (target - guided)).to(trajectory.dtype)

    def loss(self, batch: Batch) -> Tensor:
        config = self.config
        trajectory = batch[ACTION]
        global_cond = self.global_condition(batch)
        noise = torch.randn_like(trajectory)
        timesteps = torch.randint(0, config.num_train_timesteps, (trajectory.shape[0],), device=trajectory.device)
        noisy = self.noise_scheduler.add_noise(trajectory, noise, timesteps)
        prediction = self.unet(noisy, timesteps, global_cond)
        target = noise if config.prediction_type == "epsilon" else trajectory
        loss = F.mse_loss(prediction, target, reduction="none")
        if config.do_mask_loss_for_padding:
            loss = loss * (~batch["action_is_pad"]).unsqueeze(-1)
        return loss.mean()


# LeRobot's diffusion module names differ from ours in two places: its ResNet is an nn.Sequential of the
# torchvision children (conv1, bn1, relu, maxpool, layer1..4 -> 0, 1, 2, 3, 4..7), and its Conv1dBlock wraps
# its layers in `.block`.
_KeyRule = tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]
_TO_LEROBOT_KEYS: list[_KeyRule] = [
    (re.compile(r"\.backbone\.conv1\."), ".backbone.0."),
    (re.compile(r"\.backbone\.bn1\."), ".backbone.1."),
    (re.compile(r"\.backbone\.layer([1-4])\."), lambda m: f".backbone.{int(m.group(1)) + 3}."),
    (re.compile(r"^(diffusion\.unet\..*\.conv[12])\.(\d+)\."), r"\1.block.\2."),
    (re.compile(r"^(diffusion\.unet\.final_conv\.0)\.(\d+)\."), r"\1.block.\2."),
]
_FROM_LEROBOT_KEYS: list[_KeyRule] = [
    (re.compile(r"\.backbone\.0\."), ".backbone.conv1."),
    (re.compile(r"\.backbone\.1\."), ".backbone.bn1."),
    (re.compile(r"\.backbone\.([4-7])\."), lambda m: f".backbone.layer{int(m.group(1)) - 3}."),
    (re.compile(r"\.block\.(\d+)\."), r".\1."),
]


class DiffusionPolicy(Policy):
    """Diffusion policy with normalisation; `predict_chunk` returns the steps from the current one on."""

    name = "diffusion"
    config_class = DiffusionConfig
    supports_rtc = True
    config: DiffusionConfig

    def __init__(self, config: DiffusionConfig, stats: Mapping[str, Mapping[str, Tensor]] | None = None) -> None:
        super().__init__(config, stats)
        self.diffusion = DiffusionModel(config)
        self.generator: torch.Generator | None = None

    @classmethod
    def lerobot_key(cls, key: str) -> str:
        for pattern, replacement in _TO_LEROBOT_KEYS:
            key = pattern.sub(replacement, key)
        return key

    @classmethod
    def own_key(cls, key: str) -> str:
        for pattern, replacement in _FROM_LEROBOT_KEYS:
            key = pattern.sub(replacement, key)
        return key

    def load_pretrained_backbone(self, path: Path) -> None:
        """Initialise the ResNet-18 of the (shared) image encoder from a local torchvision weights file."""
        if not self.config.image_features:
            raise PolicyConfigError("the policy has no camera input, so no backbone to load weights into")
        if self.config.use_group_norm:
            raise PolicyConfigError("pretrained ResNet weights need batch norm: set use_group_norm=false")
        for encoder in self.diffusion.rgb_encoders:
            load_backbone_weights(encoder.backbone, path)

    def compute_loss(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        loss = self.diffusion.loss(self.normalizer.normalize(batch))
        return loss, {"mse_loss": float(loss.detach())}

    def predict_chunk_batch(self, batch: Batch) -> Tensor:
        normalized = self.normalizer.normalize(batch)
        trajectory = self.diffusion.sample(self.diffusion.global_condition(normalized), self.generator)
        actions = self.normalizer.unnormalize_value(ACTION, trajectory)
        return actions[:, self.config.n_obs_steps - 1 :]

    def predict_chunk_inpainted_batch(self, batch: Batch, prefix: RtcPrefix) -> Tensor:
        """Real-time chunking (`rtc.py`): the chunk continues `prefix`, guided over the overlap; its first d steps
        are the prefix's (they execute from the previous chunk while this inference runs)."""
        config = self.config
        normalized = self.normalizer.normalize(batch)
        global_cond = self.diffusion.global_condition(normalized)
        offset = config.n_obs_steps - 1  # the trajectory starts that many steps before the observation
        chunk_length = config.chunk_length
        previous = prefix.actions.to(device=global_cond.device, dtype=global_cond.dtype)[:chunk_length]
        if previous.shape[1] != config.action_feature.shape[0]:
            raise FeatureMismatchError(
                f"RTC prefix: {previous.shape[1]} values per step, the policy acts on {config.action_feature.shape[0]}"
            )
        steps = previous.shape[0]
        target = torch.zeros(config.horizon, previous.shape[1], device=global_cond.device, dtype=global_cond.dtype)
        target[offset : offset + steps] = self.normalizer.normalize_value(ACTION, previous)
        weights = torch.zeros(config.horizon, device=global_cond.device, dtype=global_cond.dtype)
        weights[offset : offset + chunk_length] = prefix_weights(
            prefix.inference_delay, prefix.execution_horizon, chunk_length, steps
        )
        guide = (target.expand(global_cond.shape[0], -1, -1), weights, prefix.max_guidance_weight)
        warm_start = None
        if prefix.start_noise_level < 1.0:
            # The previous chunk, its last step held past its end (and before the observation, its first).
            start = target.clone()
            start[offset + steps :] = target[offset + steps - 1]
            start[:offset] = target[offset]
            warm_start = (start.expand(global_cond.shape[0], -1, -1), prefix.start_noise_level)
        trajectory = self.diffusion.sample(global_cond, self.generator, guide, warm_start)
        actions = self.normalizer.unnormalize_value(ACTION, trajectory)[:, offset:].clone()
        frozen = frozen_steps(prefix, chunk_length)
        actions[:, :frozen] = previous[:frozen]
        return actions
