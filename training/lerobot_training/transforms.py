"""Camera image transforms for training, configured the way LeRobot configures them.

LeRobot's `ImageTransformsConfig` (lerobot/datasets/transforms.py): a table of named transforms, each
with a `weight` (its probability of being picked), a `type` and `kwargs` (the ranges its parameter is
drawn from); `max_num_transforms` of them are drawn without replacement per sample, applied in the
listed order or, with `random_order`, shuffled. The same JSON shape is read here:

    {"enable": true, "max_num_transforms": 3, "random_order": false,
     "tfs": {"brightness": {"weight": 1.0, "type": "ColorJitter", "kwargs": {"brightness": [0.8, 1.2]}}, ...}}

Types (plain torch; torchvision is not a dependency): `ColorJitter` (`brightness`, `contrast`,
`saturation`, `hue`), `SharpnessJitter` (`sharpness`), `RandomAffine` (`degrees`, `translate`),
`RandomResizedCrop` (`scale`: the kept fraction of each side, resized back to the input size). They follow
torchvision's definitions. Every draw comes from the generator passed in (seeded per sample by the
dataset), so a sample's transform is reproducible; all frames of one sample's window get the same draw.
Images stay uint8 (..., 3, H, W) of the same shape. Applied on the training side only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from lerobot_training.errors import PolicyConfigError

_COLOR_KEYS = ("brightness", "contrast", "saturation", "hue")
_KWARGS: dict[str, tuple[str, ...]] = {
    "ColorJitter": _COLOR_KEYS,
    "SharpnessJitter": ("sharpness",),
    "RandomAffine": ("degrees", "translate"),
    "RandomResizedCrop": ("scale",),
}
TRANSFORM_TYPES = tuple(_KWARGS)


@dataclass(frozen=True)
class ImageTransformSpec:
    """One named transform: its pick weight, type and parameter ranges."""

    type: str
    kwargs: dict[str, tuple[float, float]]
    weight: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return {"weight": self.weight, "type": self.type, "kwargs": {k: list(v) for k, v in self.kwargs.items()}}


def _default_table() -> dict[str, ImageTransformSpec]:
    """LeRobot 0.4.4's default table, plus a random crop that is off (weight 0) unless asked for."""
    return {
        "brightness": ImageTransformSpec("ColorJitter", {"brightness": (0.8, 1.2)}),
        "contrast": ImageTransformSpec("ColorJitter", {"contrast": (0.8, 1.2)}),
        "saturation": ImageTransformSpec("ColorJitter", {"saturation": (0.5, 1.5)}),
        "hue": ImageTransformSpec("ColorJitter", {"hue": (-0.05, 0.05)}),
        "sharpness": ImageTransformSpec("SharpnessJitter", {"sharpness": (0.5, 1.5)}),
        "affine": ImageTransformSpec("RandomAffine", {"degrees": (-5.0, 5.0), "translate": (0.05, 0.05)}),
        "crop": ImageTransformSpec("RandomResizedCrop", {"scale": (0.9, 1.0)}, weight=0.0),
    }


@dataclass(frozen=True)
class ImageTransformsConfig:
    """LeRobot's `ImageTransformsConfig` fields; `from_json` validates and names what is wrong."""

    enable: bool = False
    max_num_transforms: int = 3
    random_order: bool = False
    tfs: dict[str, ImageTransformSpec] = field(default_factory=_default_table)

    def to_json(self) -> dict[str, Any]:
        return {
            "enable": self.enable,
            "max_num_transforms": self.max_num_transforms,
            "random_order": self.random_order,
            "tfs": {name: spec.to_json() for name, spec in self.tfs.items()},
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "image transforms") -> ImageTransformsConfig:
        if not isinstance(data, Mapping):
            raise PolicyConfigError(f"{where} must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"enable", "max_num_transforms", "random_order", "tfs"})
        if unknown:
            raise PolicyConfigError(
                f"{where}: unknown field(s) {unknown}; known: enable, max_num_transforms, random_order, tfs"
            )
        enable, random_order = data.get("enable", True), data.get("random_order", False)
        count = data.get("max_num_transforms", 3)
        if not isinstance(enable, bool) or not isinstance(random_order, bool):
            raise PolicyConfigError(f"{where}: enable and random_order must be true or false")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise PolicyConfigError(f"{where}: max_num_transforms must be an integer >= 1, got {count!r}")
        table = data.get("tfs")
        tfs = _default_table() if table is None else _parse_table(table, where)
        return cls(enable, count, random_order, tfs)


def _pair(value: Any, where: str) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (float(value), float(value))
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
        and value[0] <= value[1]
    ):
        return (float(value[0]), float(value[1]))
    raise PolicyConfigError(f"{where} must be [low, high] with low <= high (finite numbers), got {value!r}")


def _fractions(value: Any, where: str) -> tuple[float, float]:
    """RandomAffine's `translate`: the largest shift as fractions of width and height (not a range)."""
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in value)
    ):
        return (float(value[0]), float(value[1]))
    raise PolicyConfigError(f"{where} must be [fraction of width, fraction of height], each in [0, 1], got {value!r}")


def _parse_table(table: Any, where: str) -> dict[str, ImageTransformSpec]:
    if not isinstance(table, Mapping):
        raise PolicyConfigError(f"{where}: tfs must be an object of named transforms")
    out = {}
    for name, spec in table.items():
        here = f"{where}: transform {name!r}"
        if not isinstance(spec, Mapping):
            raise PolicyConfigError(f"{here} must be an object with weight, type and kwargs")
        kind = spec.get("type")
        if kind not in _KWARGS:
            raise PolicyConfigError(f"{here}: unknown type {kind!r}; known: {', '.join(TRANSFORM_TYPES)}")
        weight = spec.get("weight", 1.0)
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not weight >= 0:
            raise PolicyConfigError(f"{here}: weight must be a number >= 0, got {weight!r}")
        kwargs = spec.get("kwargs", {})
        if not isinstance(kwargs, Mapping) or not kwargs:
            raise PolicyConfigError(f"{here}: kwargs must name at least one of {', '.join(_KWARGS[kind])}")
        ranges = {}
        for key, value in kwargs.items():
            if key not in _KWARGS[kind]:
                raise PolicyConfigError(f"{here}: {kind} has no parameter {key!r}; known: {', '.join(_KWARGS[kind])}")
            ranges[key] = _fractions(value, f"{here}: {key}") if key == "translate" else _pair(value, f"{here}: {key}")
        _check_ranges(kind, ranges, here)
        out[str(name)] = ImageTransformSpec(str(kind), ranges, float(weight))
    return out


def _check_ranges(kind: str, ranges: Mapping[str, tuple[float, float]], where: str) -> None:
    for key, (low, high) in ranges.items():
        if key == "translate":
            continue
        if key in ("brightness", "contrast", "saturation", "sharpness") and low < 0:
            raise PolicyConfigError(f"{where}: {key} factors must be >= 0, got [{low}, {high}]")
        if key == "hue" and not -0.5 <= low <= high <= 0.5:
            raise PolicyConfigError(f"{where}: hue must lie within [-0.5, 0.5], got [{low}, {high}]")
        if key == "scale" and not 0 < low <= high <= 1:
            raise PolicyConfigError(f"{where}: scale must lie within (0, 1], got [{low}, {high}]")


def _uniform(low: float, high: float, generator: torch.Generator) -> float:
    return low + (high - low) * float(torch.rand((), generator=generator))


def _gray(x: Tensor) -> Tensor:
    return 0.299 * x[..., 0:1, :, :] + 0.587 * x[..., 1:2, :, :] + 0.114 * x[..., 2:3, :, :]


def _blend(image: Tensor, other: Tensor, factor: float) -> Tensor:
    return (factor * image + (1 - factor) * other).clamp(0, 1)


def _rgb_to_hsv(x: Tensor) -> Tensor:
    r, g, b = x.unbind(-3)
    maxc, _ = x.max(dim=-3)
    minc, _ = x.min(dim=-3)
    delta = maxc - minc
    safe = torch.where(delta == 0, torch.ones_like(delta), delta)
    hue = torch.where(maxc == r, (g - b) / safe, torch.where(maxc == g, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe))
    hue = torch.where(delta == 0, torch.zeros_like(hue), (hue / 6.0) % 1.0)
    sat = torch.where(maxc == 0, torch.zeros_like(maxc), delta / torch.where(maxc == 0, torch.ones_like(maxc), maxc))
    return torch.stack([hue, sat, maxc], dim=-3)


def _hsv_to_rgb(x: Tensor) -> Tensor:
    hue, sat, val = x.unbind(-3)
    i = torch.floor(hue * 6.0)
    f = hue * 6.0 - i
    i = i.long() % 6
    p, q, t = val * (1 - sat), val * (1 - sat * f), val * (1 - sat * (1 - f))
    choices = [(val, t, p), (q, val, p), (p, val, t), (p, q, val), (t, p, val), (val, p, q)]
    channels = []
    for channel in range(3):
        out = torch.zeros_like(val)
        for index, triple in enumerate(choices):
            out = torch.where(i == index, triple[channel], out)
        channels.append(out)
    return torch.stack(channels, dim=-3)


def _color_jitter(x: Tensor, ranges: Mapping[str, tuple[float, float]], generator: torch.Generator) -> Tensor:
    for key in _COLOR_KEYS:  # torchvision's order when several are given to one ColorJitter
        if key not in ranges:
            continue
        value = _uniform(*ranges[key], generator)
        if key == "brightness":
            x = (x * value).clamp(0, 1)
        elif key == "contrast":
            x = _blend(x, _gray(x).mean(dim=(-3, -2, -1), keepdim=True), value)
        elif key == "saturation":
            x = _blend(x, _gray(x), value)
        else:
            hsv = _rgb_to_hsv(x)
            hsv = torch.stack([(hsv[..., 0, :, :] + value) % 1.0, hsv[..., 1, :, :], hsv[..., 2, :, :]], dim=-3)
            x = _hsv_to_rgb(hsv)
    return x


def _sharpness(x: Tensor, ranges: Mapping[str, tuple[float, float]], generator: torch.Generator) -> Tensor:
    factor = _uniform(*ranges["sharpness"], generator)
    height, width = x.shape[-2:]
    if height < 3 or width < 3:
        return x
    flat = x.reshape(-1, 3, height, width)
    kernel = torch.tensor([[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]], dtype=x.dtype) / 13.0
    blurred = F.conv2d(flat, kernel.expand(3, 1, 3, 3), groups=3)
    degenerate = flat.clone()
    degenerate[..., 1:-1, 1:-1] = blurred  # torchvision keeps the border pixels
    return _blend(flat, degenerate, factor).reshape(x.shape)


def _warp(x: Tensor, theta: Tensor) -> Tensor:
    height, width = x.shape[-2:]
    flat = x.reshape(-1, 3, height, width)
    grid = F.affine_grid(theta.expand(flat.shape[0], 2, 3), list(flat.shape), align_corners=False)
    return F.grid_sample(flat, grid, mode="nearest", padding_mode="zeros", align_corners=False).reshape(x.shape)


def _affine(x: Tensor, ranges: Mapping[str, tuple[float, float]], generator: torch.Generator) -> Tensor:
    angle = math.radians(_uniform(*ranges.get("degrees", (0.0, 0.0)), generator))
    max_dx, max_dy = ranges.get("translate", (0.0, 0.0))
    dx = _uniform(-max_dx, max_dx, generator) * 2  # grid units: the image spans [-1, 1]
    dy = _uniform(-max_dy, max_dy, generator) * 2
    cos, sin = math.cos(angle), math.sin(angle)
    theta = torch.tensor([[[cos, -sin, -dx], [sin, cos, -dy]]], dtype=x.dtype)
    return _warp(x, theta)


def _resized_crop(x: Tensor, ranges: Mapping[str, tuple[float, float]], generator: torch.Generator) -> Tensor:
    side = _uniform(*ranges["scale"], generator)
    cx = _uniform(-(1 - side), 1 - side, generator)
    cy = _uniform(-(1 - side), 1 - side, generator)
    theta = torch.tensor([[[side, 0.0, cx], [0.0, side, cy]]], dtype=x.dtype)
    height, width = x.shape[-2:]
    flat = x.reshape(-1, 3, height, width)
    grid = F.affine_grid(theta.expand(flat.shape[0], 2, 3), list(flat.shape), align_corners=False)
    return F.grid_sample(flat, grid, mode="bilinear", padding_mode="border", align_corners=False).reshape(x.shape)


_APPLY: dict[str, Callable[[Tensor, Mapping[str, tuple[float, float]], torch.Generator], Tensor]] = {
    "ColorJitter": _color_jitter,
    "SharpnessJitter": _sharpness,
    "RandomAffine": _affine,
    "RandomResizedCrop": _resized_crop,
}


class ImageTransforms:
    """Applies a random subset of the configured transforms to uint8 (..., 3, H, W) frames."""

    def __init__(self, config: ImageTransformsConfig) -> None:
        self.config = config
        self.names = [name for name, spec in config.tfs.items() if spec.weight > 0]
        self.weights = torch.tensor([config.tfs[name].weight for name in self.names], dtype=torch.float64)
        self.count = min(len(self.names), config.max_num_transforms)

    @property
    def active(self) -> bool:
        return self.config.enable and self.count > 0

    def pick(self, generator: torch.Generator) -> list[str]:
        """The names of the transforms one sample gets, in the order they apply."""
        if not self.active:
            return []
        chosen = torch.multinomial(self.weights, self.count, replacement=False, generator=generator)
        if self.config.random_order:
            chosen = chosen[torch.randperm(len(chosen), generator=generator)]
        else:
            chosen = chosen.sort().values
        return [self.names[int(i)] for i in chosen]

    def __call__(self, frames: Tensor, generator: torch.Generator) -> Tensor:
        """frames: uint8 (..., 3, H, W); the same draw applies to every frame of the window."""
        names = self.pick(generator)
        if not names:
            return frames
        x = frames.float() / 255.0
        for name in names:
            spec = self.config.tfs[name]
            x = _APPLY[spec.type](x, spec.kwargs, generator)
        return (x.clamp(0, 1) * 255).round().to(torch.uint8)
