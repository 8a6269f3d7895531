"""ACT: Action Chunking Transformer (Zhao et al. 2023), structured as LeRobot's `modeling_act.py`.

The module tree and parameter names equal LeRobot's `ACTPolicy.model` (`model.backbone.*`,
`model.encoder.layers.N.*`, `model.vae_encoder.*`, `model.decoder.*`, `model.action_head`, ...), and
`ACTConfig` has LeRobot's field names and defaults, so a LeRobot ACT checkpoint loads into this class.
The CVAE encoder (`vae_encoder`) only runs in training; at inference the latent is zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lerobot_training.errors import FeatureMismatchError, PolicyConfigError
from lerobot_training.features import ACTION, OBS_ENV_STATE, OBS_STATE
from lerobot_training.policies.base import Batch, Policy
from lerobot_training.policies.config import PolicyConfig
from lerobot_training.policies.resnet import ResNet18Backbone, load_backbone_weights


@dataclass
class ACTConfig(PolicyConfig):
    """LeRobot's `ACTConfig` fields and defaults (see its docstring for their meaning).

    `pretrained_backbone_weights` is a local path here (`.safetensors` or torchvision `.pth`) or None;
    LeRobot's torchvision weight names (e.g. `ResNet18_Weights.IMAGENET1K_V1`) cannot be downloaded and
    are rejected when a policy is built from scratch with them.
    """

    type: ClassVar[str] = "act"

    chunk_size: int = 100
    n_action_steps: int = 100
    vision_backbone: str = "resnet18"
    pretrained_backbone_weights: str | None = None
    replace_final_stride_with_dilation: bool = False
    pre_norm: bool = False
    dim_model: int = 512
    n_heads: int = 8
    dim_feedforward: int = 3200
    feedforward_activation: str = "relu"
    n_encoder_layers: int = 4
    n_decoder_layers: int = 1
    use_vae: bool = True
    latent_dim: int = 32
    n_vae_encoder_layers: int = 4
    temporal_ensemble_coeff: float | None = None
    dropout: float = 0.1
    kl_weight: float = 10.0
    optimizer_lr: float = 1e-5
    optimizer_weight_decay: float = 1e-4
    optimizer_lr_backbone: float = 1e-5

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vision_backbone != "resnet18":
            raise PolicyConfigError(
                f"vision_backbone must be 'resnet18' (the only one built in), got {self.vision_backbone!r}"
            )
        if self.replace_final_stride_with_dilation:
            raise PolicyConfigError("replace_final_stride_with_dilation is not supported by resnet18; set it to false")
        if self.n_obs_steps != 1:
            raise PolicyConfigError(f"ACT uses one observation step; n_obs_steps must be 1, got {self.n_obs_steps}")
        if not 1 <= self.n_action_steps <= self.chunk_size:
            raise PolicyConfigError(
                f"n_action_steps must be in [1, chunk_size={self.chunk_size}], got {self.n_action_steps}"
            )
        if self.temporal_ensemble_coeff is not None and self.n_action_steps > 1:
            raise PolicyConfigError("temporal_ensemble_coeff needs n_action_steps == 1 (the policy runs every step)")
        if self.dim_model % self.n_heads != 0:
            raise PolicyConfigError(f"dim_model ({self.dim_model}) must be divisible by n_heads ({self.n_heads})")
        if self.dim_model % 2 != 0:
            raise PolicyConfigError(f"dim_model must be even (2-D sine embedding), got {self.dim_model}")
        if self.feedforward_activation not in _ACTIVATIONS:
            raise PolicyConfigError(f"feedforward_activation must be one of {sorted(_ACTIVATIONS)}")
        for name in ("chunk_size", "dim_model", "n_heads", "dim_feedforward", "n_encoder_layers", "n_decoder_layers",
                     "latent_dim"):  # fmt: skip
            if getattr(self, name) < 1:
                raise PolicyConfigError(f"{name} must be >= 1, got {getattr(self, name)}")

    def validate_features(self) -> None:
        super().validate_features()
        if not self.image_features and self.env_state_feature is None:
            raise FeatureMismatchError(
                f"ACT needs at least one camera (observation.images.*) or {OBS_ENV_STATE!r} among the inputs"
            )

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))

    @property
    def chunk_length(self) -> int:
        return self.chunk_size

    @property
    def executed_steps(self) -> int:
        return self.n_action_steps


_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "glu": F.glu}


def sinusoidal_positions(num_positions: int, dimension: int) -> Tensor:
    """(num_positions, dimension) 1-D sine/cosine table of "Attention is all you need" (float64 maths)."""
    position = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1)
    exponent = 2 * (torch.arange(dimension, dtype=torch.float64) // 2) / dimension
    table = position / torch.pow(torch.tensor(10000.0, dtype=torch.float64), exponent)
    table[:, 0::2] = table[:, 0::2].sin()
    table[:, 1::2] = table[:, 1::2].cos()
    return table.float()


def sinusoidal_positions_2d(feature_map: Tensor, dimension: int) -> Tensor:
    """(1, 2*dimension, H, W) 2-D sine embedding of a feature map, positions scaled to (0, 2π] (DETR/ACT)."""
    height, width = feature_map.shape[-2:]
    device = feature_map.device
    y = torch.arange(1, height + 1, dtype=torch.float32, device=device).view(1, height, 1).expand(1, height, width)
    x = torch.arange(1, width + 1, dtype=torch.float32, device=device).view(1, 1, width).expand(1, height, width)
    eps, two_pi = 1e-6, 2 * math.pi
    y = y / (height + eps) * two_pi
    x = x / (width + eps) * two_pi
    inverse_frequency = 10000 ** (2 * (torch.arange(dimension, dtype=torch.float32, device=device) // 2) / dimension)
    x = x.unsqueeze(-1) / inverse_frequency
    y = y.unsqueeze(-1) / inverse_frequency
    # sine and cosine interleaved along the channel axis
    pos_x = torch.stack((x[..., 0::2].sin(), x[..., 1::2].cos()), dim=-1).flatten(3)
    pos_y = torch.stack((y[..., 0::2].sin(), y[..., 1::2].cos()), dim=-1).flatten(3)
    return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


def _with_pos(x: Tensor, pos: Tensor | None) -> Tensor:
    return x if pos is None else x + pos


class ACTEncoderLayer(nn.Module):
    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(config.dim_model, config.n_heads, dropout=config.dropout)
        self.linear1 = nn.Linear(config.dim_model, config.dim_feedforward)
        self.dropout = nn.Dropout(config.dropout)
        self.linear2 = nn.Linear(config.dim_feedforward, config.dim_model)
        self.norm1 = nn.LayerNorm(config.dim_model)
        self.norm2 = nn.LayerNorm(config.dim_model)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.activation = _ACTIVATIONS[config.feedforward_activation]
        self.pre_norm = config.pre_norm

    def forward(self, x: Tensor, pos_embed: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor:
        skip = x
        if self.pre_norm:
            x = self.norm1(x)
        q = k = _with_pos(x, pos_embed)
        x = skip + self.dropout1(self.self_attn(q, k, value=x, key_padding_mask=key_padding_mask)[0])
        if self.pre_norm:
            skip = x
            x = self.norm2(x)
        else:
            x = self.norm1(x)
            skip = x
        x = skip + self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
        if not self.pre_norm:
            x = self.norm2(x)
        return x


class ACTEncoder(nn.Module):
    def __init__(self, config: ACTConfig, is_vae_encoder: bool = False) -> None:
        super().__init__()
        num_layers = config.n_vae_encoder_layers if is_vae_encoder else config.n_encoder_layers
        self.layers = nn.ModuleList([ACTEncoderLayer(config) for _ in range(num_layers)])
        self.norm: nn.Module = nn.LayerNorm(config.dim_model) if config.pre_norm else nn.Identity()

    def forward(self, x: Tensor, pos_embed: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, pos_embed=pos_embed, key_padding_mask=key_padding_mask)
        out: Tensor = self.norm(x)
        return out


class ACTDecoderLayer(nn.Module):
    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(config.dim_model, config.n_heads, dropout=config.dropout)
        self.multihead_attn = nn.MultiheadAttention(config.dim_model, config.n_heads, dropout=config.dropout)
        self.linear1 = nn.Linear(config.dim_model, config.dim_feedforward)
        self.dropout = nn.Dropout(config.dropout)
        self.linear2 = nn.Linear(config.dim_feedforward, config.dim_model)
        self.norm1 = nn.LayerNorm(config.dim_model)
        self.norm2 = nn.LayerNorm(config.dim_model)
        self.norm3 = nn.LayerNorm(config.dim_model)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.dropout3 = nn.Dropout(config.dropout)
        self.activation = _ACTIVATIONS[config.feedforward_activation]
        self.pre_norm = config.pre_norm

    def forward(self, x: Tensor, encoder_out: Tensor, decoder_pos_embed: Tensor, encoder_pos_embed: Tensor) -> Tensor:
        skip = x
        if self.pre_norm:
            x = self.norm1(x)
        q = k = _with_pos(x, decoder_pos_embed)
        x = skip + self.dropout1(self.self_attn(q, k, value=x)[0])
        if self.pre_norm:
            skip = x
            x = self.norm2(x)
        else:
            x = self.norm1(x)
            skip = x
        attended = self.multihead_attn(
            query=_with_pos(x, decoder_pos_embed), key=_with_pos(encoder_out, encoder_pos_embed), value=encoder_out
        )[0]
        x = skip + self.dropout2(attended)
        if self.pre_norm:
            skip = x
            x = self.norm3(x)
        else:
            x = self.norm2(x)
            skip = x
        x = skip + self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))
        if not self.pre_norm:
            x = self.norm3(x)
        return x


class ACTDecoder(nn.Module):
    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList([ACTDecoderLayer(config) for _ in range(config.n_decoder_layers)])
        self.norm = nn.LayerNorm(config.dim_model)

    def forward(self, x: Tensor, encoder_out: Tensor, decoder_pos_embed: Tensor, encoder_pos_embed: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, encoder_out, decoder_pos_embed=decoder_pos_embed, encoder_pos_embed=encoder_pos_embed)
        out: Tensor = self.norm(x)
        return out


class ACT(nn.Module):
    """The network: optional CVAE encoder over (cls, state, actions), transformer encoder over
    (latent, state, env state, camera feature cells), transformer decoder with learned chunk queries."""

    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.config = config
        d = config.dim_model
        state = config.robot_state_feature
        action_dim = config.action_feature.shape[0]
        if config.use_vae:
            self.vae_encoder = ACTEncoder(config, is_vae_encoder=True)
            self.vae_encoder_cls_embed = nn.Embedding(1, d)
            if state is not None:
                self.vae_encoder_robot_state_input_proj = nn.Linear(state.shape[0], d)
            self.vae_encoder_action_input_proj = nn.Linear(action_dim, d)
            self.vae_encoder_latent_output_proj = nn.Linear(d, config.latent_dim * 2)
            num_tokens = 1 + config.chunk_size + (1 if state is not None else 0)
            self.register_buffer("vae_encoder_pos_enc", sinusoidal_positions(num_tokens, d).unsqueeze(0))
        if config.image_features:
            self.backbone = ResNet18Backbone(norm="frozen_batch_norm")
        self.encoder = ACTEncoder(config)
        self.decoder = ACTDecoder(config)
        if state is not None:
            self.encoder_robot_state_input_proj = nn.Linear(state.shape[0], d)
        env = config.env_state_feature
        if env is not None:
            self.encoder_env_state_input_proj = nn.Linear(env.shape[0], d)
        self.encoder_latent_input_proj = nn.Linear(config.latent_dim, d)
        if config.image_features:
            self.encoder_img_feat_input_proj = nn.Conv2d(ResNet18Backbone.out_channels, d, kernel_size=1)
        n_1d_tokens = 1 + (1 if state is not None else 0) + (1 if env is not None else 0)
        self.encoder_1d_feature_pos_embed = nn.Embedding(n_1d_tokens, d)
        self.decoder_pos_embed = nn.Embedding(config.chunk_size, d)
        self.action_head = nn.Linear(d, action_dim)
        for p in [*self.encoder.parameters(), *self.decoder.parameters()]:
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def _latent(self, batch: Batch, batch_size: int) -> tuple[Tensor, Tensor | None, Tensor | None]:
        config = self.config
        if not (config.use_vae and self.training and ACTION in batch):
            device = self.encoder_latent_input_proj.weight.device
            return torch.zeros(batch_size, config.latent_dim, device=device), None, None
        tokens = [self.vae_encoder_cls_embed.weight.unsqueeze(0).expand(batch_size, -1, -1)]
        if config.robot_state_feature is not None:
            tokens.append(self.vae_encoder_robot_state_input_proj(batch[OBS_STATE]).unsqueeze(1))
        tokens.append(self.vae_encoder_action_input_proj(batch[ACTION]))
        vae_input = torch.cat(tokens, dim=1)
        prefix_pad = torch.zeros(batch_size, vae_input.shape[1] - config.chunk_size, dtype=torch.bool,
                                 device=vae_input.device)  # fmt: skip
        key_padding_mask = torch.cat([prefix_pad, batch["action_is_pad"]], dim=1)
        pos: Tensor = self.vae_encoder_pos_enc  # type: ignore[assignment]
        cls_out = self.vae_encoder(
            vae_input.permute(1, 0, 2), pos_embed=pos.permute(1, 0, 2), key_padding_mask=key_padding_mask
        )[0]
        params = self.vae_encoder_latent_output_proj(cls_out)
        mu = params[:, : config.latent_dim]
        log_sigma_x2 = params[:, config.latent_dim :]  # 2·log σ, as in the original implementation
        return mu + (log_sigma_x2 / 2).exp() * torch.randn_like(mu), mu, log_sigma_x2

    def forward(self, batch: Batch) -> tuple[Tensor, tuple[Tensor | None, Tensor | None]]:
        """(B, chunk_size, action_dim) normalised actions, and the latent's (mu, 2·log σ) when the CVAE ran.

        `batch` holds normalised `observation.state` (B, S), `observation.environment_state` (B, E),
        `observation.images` (a list of (B, 3, H, W), one per camera) and, in training, `action` and
        `action_is_pad`.
        """
        config = self.config
        images: list[Tensor] = batch.get("observation.images", [])  # type: ignore[assignment]
        if images:
            batch_size = images[0].shape[0]
        elif OBS_ENV_STATE in batch:
            batch_size = batch[OBS_ENV_STATE].shape[0]
        else:
            batch_size = batch[OBS_STATE].shape[0]
        latent, mu, log_sigma_x2 = self._latent(batch, batch_size)
        tokens = [self.encoder_latent_input_proj(latent)]
        positions = list(self.encoder_1d_feature_pos_embed.weight.unsqueeze(1))
        if config.robot_state_feature is not None:
            tokens.append(self.encoder_robot_state_input_proj(batch[OBS_STATE]))
        if config.env_state_feature is not None:
            tokens.append(self.encoder_env_state_input_proj(batch[OBS_ENV_STATE]))
        token_seq = torch.stack(tokens, dim=0)
        pos_seq = torch.stack(positions, dim=0)
        for image in images:
            features = self.backbone(image)
            cam_pos = sinusoidal_positions_2d(features, config.dim_model // 2).to(features.dtype)
            cam_tokens = self.encoder_img_feat_input_proj(features)
            token_seq = torch.cat([token_seq, cam_tokens.flatten(2).permute(2, 0, 1)], dim=0)
            pos_seq = torch.cat([pos_seq, cam_pos.flatten(2).permute(2, 0, 1).expand(-1, 1, -1)], dim=0)
        encoder_out = self.encoder(token_seq, pos_embed=pos_seq)
        decoder_in = torch.zeros(config.chunk_size, batch_size, config.dim_model, dtype=pos_seq.dtype,
                                 device=pos_seq.device)  # fmt: skip
        decoder_out = self.decoder(
            decoder_in, encoder_out, decoder_pos_embed=self.decoder_pos_embed.weight.unsqueeze(1),
            encoder_pos_embed=pos_seq,
        )  # fmt: skip
        return self.action_head(decoder_out.transpose(0, 1)), (mu, log_sigma_x2)


class ACTTemporalEnsembler:
    """Online exponentially weighted average of overlapping chunks (ACT paper, Algorithm 2).

    Weight of the i-th oldest prediction for a step: exp(-coeff · i); coeff 0 weighs all equally,
    positive favours older predictions (ACT uses 0.01).
    """

    def __init__(self, coeff: float, chunk_size: int) -> None:
        self.chunk_size = chunk_size
        self.weights = torch.exp(-coeff * torch.arange(chunk_size, dtype=torch.float32))
        self.weights_cumsum = torch.cumsum(self.weights, dim=0)
        self.reset()

    def reset(self) -> None:
        self.actions: Tensor | None = None
        self.counts: Tensor | None = None

    def update(self, chunk: Tensor) -> Tensor:
        """Fold a new (chunk_size, action_dim) chunk in and return the action for the current step."""
        weights = self.weights.to(chunk.device)
        cumsum = self.weights_cumsum.to(chunk.device)
        if self.actions is None or self.counts is None:
            self.actions = chunk.clone()
            self.counts = torch.ones(self.chunk_size, 1, dtype=torch.long, device=chunk.device)
        else:
            self.actions = self.actions * cumsum[self.counts - 1]
            self.actions = (self.actions + chunk[:-1] * weights[self.counts]) / cumsum[self.counts]
            self.counts = torch.clamp(self.counts + 1, max=self.chunk_size)
            self.actions = torch.cat([self.actions, chunk[-1:]], dim=0)
            self.counts = torch.cat([self.counts, torch.ones_like(self.counts[-1:])])
        action, self.actions, self.counts = self.actions[0], self.actions[1:], self.counts[1:]
        return action


class ACTPolicy(Policy):
    """ACT with normalisation, L1 + KL loss, chunk prediction and optional temporal ensembling."""

    name = "act"
    config_class = ACTConfig
    config: ACTConfig

    def __init__(self, config: ACTConfig, stats: Mapping[str, Mapping[str, Tensor]] | None = None) -> None:
        super().__init__(config, stats)
        self.model = ACT(config)
        self.temporal_ensembler = (
            ACTTemporalEnsembler(config.temporal_ensemble_coeff, config.chunk_size)
            if config.temporal_ensemble_coeff is not None
            else None
        )

    def load_pretrained_backbone(self, path: Path) -> None:
        """Initialise the ResNet-18 from a local torchvision weights file (ImageNet weights cannot be downloaded)."""
        if not self.config.image_features:
            raise PolicyConfigError("the policy has no camera input, so no backbone to load weights into")
        load_backbone_weights(self.model.backbone, path)

    def _model_batch(self, batch: Batch) -> dict[str, Any]:
        normalized: dict[str, Any] = self.normalizer.normalize(batch)
        if self.config.image_features:
            normalized["observation.images"] = [normalized[key] for key in self.config.image_features]
        return normalized

    def compute_loss(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        normalized = self._model_batch(batch)
        actions_hat, (mu, log_sigma_x2) = self.model(normalized)
        valid = ~batch["action_is_pad"].unsqueeze(-1)
        l1 = (F.l1_loss(normalized[ACTION], actions_hat, reduction="none") * valid).mean()
        logs = {"l1_loss": float(l1.detach())}
        if mu is None or log_sigma_x2 is None:
            return l1, logs
        # KL(q(z|x) || N(0, I)) summed over latent dims, averaged over the batch (Kingma & Welling, App. B)
        kld = (-0.5 * (1 + log_sigma_x2 - mu.pow(2) - log_sigma_x2.exp())).sum(-1).mean()
        logs["kld_loss"] = float(kld.detach())
        return l1 + kld * self.config.kl_weight, logs

    def predict_chunk_batch(self, batch: Batch) -> Tensor:
        actions = self.model(self._model_batch(batch))[0]
        return self.normalizer.unnormalize_value(ACTION, actions)

    def reset(self) -> None:
        super().reset()
        if self.temporal_ensembler is not None:
            self.temporal_ensembler.reset()

    @torch.no_grad()
    def select_action(self, observation: Mapping[str, Any]) -> Tensor:
        if self.temporal_ensembler is None:
            return super().select_action(observation)
        return self.temporal_ensembler.update(self.predict_chunk(observation))
