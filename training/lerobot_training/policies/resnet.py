"""ResNet-18 image backbone in plain torch, with torchvision's parameter names.

torchvision's C++ ops are not available here, so the backbone is written out; its state-dict keys
(`conv1.weight`, `bn1.running_mean`, `layer1.0.conv1.weight`, `layer2.0.downsample.0.weight`, ...) are
torchvision's, so ImageNet weights saved from torchvision load unchanged, and so do the `model.backbone.*`
tensors of a LeRobot ACT checkpoint. The classifier (`avgpool`, `fc`) is left out: the backbone returns
the layer4 feature map.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

from lerobot_training.errors import CheckpointError

RESNET18_OUT_CHANNELS = 512
NormFactory = Callable[[int], nn.Module]


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with fixed statistics and affine terms (all buffers, never trained), as in torchvision."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x: Tensor) -> Tensor:
        weight, bias, mean, var = (self.get_buffer(n) for n in ("weight", "bias", "running_mean", "running_var"))
        scale = weight * (var + self.eps).rsqrt()
        shift = bias - mean * scale
        return x * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)


def norm_factory(kind: str) -> NormFactory:
    """`frozen_batch_norm` (ACT), `group_norm` (diffusion: 16 channels per group) or `batch_norm`."""
    if kind == "frozen_batch_norm":
        return FrozenBatchNorm2d
    if kind == "group_norm":
        return lambda channels: nn.GroupNorm(num_groups=channels // 16, num_channels=channels)
    if kind == "batch_norm":
        return nn.BatchNorm2d
    raise ValueError(f"unknown norm layer {kind!r}; use frozen_batch_norm, group_norm or batch_norm")


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, channels: int, stride: int, norm: NormFactory) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, padding=1, bias=False)
        self.bn1 = norm(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, padding=1, bias=False)
        self.bn2 = norm(channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride, bias=False), norm(channels))

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        result: Tensor = self.relu(out + identity)
        return result


class ResNet18Backbone(nn.Module):
    """ResNet-18 up to layer4: (B, 3, H, W) -> (B, 512, ceil(H/32), ceil(W/32)).

    torchvision's ResNet-18 has no dilated variant (its BasicBlock rejects dilation), so neither has this.
    """

    out_channels = RESNET18_OUT_CHANNELS

    def __init__(self, norm: str = "frozen_batch_norm") -> None:
        super().__init__()
        factory = norm_factory(norm)
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = factory(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(64, 64, 1, factory), BasicBlock(64, 64, 1, factory))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2, factory), BasicBlock(128, 128, 1, factory))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2, factory), BasicBlock(256, 256, 1, factory))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2, factory), BasicBlock(512, 512, 1, factory))
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        out: Tensor = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return out


def read_state_dict(path: Path) -> dict[str, Tensor]:
    """Tensors of a weights file: `.safetensors`, or a torchvision `.pth` read with `weights_only=True`.

    `weights_only` restricts unpickling to tensors and plain containers; code cannot run from the file.
    """
    if not path.is_file():
        raise CheckpointError(f"backbone weights {path} do not exist; pass the path of a resnet18 .safetensors/.pth")
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return dict(load_file(str(path)))
        except (SafetensorError, OSError) as err:
            raise CheckpointError(f"{path} is not a readable safetensors file: {err}") from None
    try:
        data = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several unrelated types for a bad file
        raise CheckpointError(f"{path} is not a readable torch weights file: {err}") from None
    if not isinstance(data, dict) or not all(isinstance(v, Tensor) for v in data.values()):
        raise CheckpointError(f"{path} does not hold a flat state dict of tensors")
    return {str(k): v for k, v in data.items()}


def load_backbone_weights(backbone: nn.Module, path: Path) -> None:
    """Load torchvision ResNet-18 weights (e.g. ImageNet) into `backbone`, ignoring the classifier.

    Keys may carry a prefix (`backbone.`, `model.backbone.`); `num_batches_tracked` is dropped. Missing
    or mis-shaped tensors raise CheckpointError naming them.
    """
    raw = read_state_dict(path)
    own = backbone.state_dict()
    tensors: dict[str, Tensor] = {}
    for key, value in raw.items():
        if key.endswith("num_batches_tracked") or key.split(".")[-2:-1] == ["fc"] or key.startswith("fc."):
            continue
        for prefix in ("model.backbone.", "backbone.", ""):
            if key.startswith(prefix) and key[len(prefix) :] in own:
                tensors[key[len(prefix) :]] = value
                break
    missing = sorted(set(own) - set(tensors))
    if missing:
        raise CheckpointError(f"{path} lacks backbone tensors {missing[:5]} ({len(missing)} in all); is it a resnet18?")
    for key, value in tensors.items():
        if tuple(value.shape) != tuple(own[key].shape):
            raise CheckpointError(
                f"{path}: tensor {key!r} has shape {tuple(value.shape)}, resnet18 needs {tuple(own[key].shape)}"
            )
    backbone.load_state_dict(tensors, strict=True)
