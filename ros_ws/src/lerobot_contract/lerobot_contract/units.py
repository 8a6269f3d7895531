"""Unit converters declared in a contract (ROS units on the topic -> dataset units).

A converter maps one joint's value. Kinds:

* ``identity``: unchanged.
* ``scale``: ``value * factor + offset`` (``rad_to_deg`` and ``deg_to_rad`` are built in).
* ``range``: linear map of ``in: [a, b]`` onto ``out: [c, d]``, clipped to ``out`` unless ``clip: false``
  (LeRobot's ``RANGE_0_100`` gripper and ``RANGE_M100_100`` body modes).
* ``per_joint``: a different converter per joint name, ``default`` for the others.

Every converter is invertible (`inverse`), so datasets can be turned back into ROS messages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from lerobot_contract.errors import ContractError

KINDS = ("identity", "scale", "range", "per_joint")

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class UnitConverter:
    """One named converter. `source` is the contract file, used in error messages."""

    name: str
    kind: str
    factor: float = 1.0
    offset: float = 0.0
    in_range: tuple[float, float] = (0.0, 1.0)
    out_range: tuple[float, float] = (0.0, 1.0)
    clip: bool = True
    joints: Mapping[str, str] = field(default_factory=dict)
    default: str = "identity"
    source: str = "<memory>"

    def __post_init__(self) -> None:
        key = f"units.{self.name}"
        if self.kind not in KINDS:
            raise ContractError(
                self.source, f"{key}.kind", f"unknown kind {self.kind!r}; use one of {', '.join(KINDS)}"
            )
        if self.kind == "scale" and (self.factor == 0.0 or not math.isfinite(self.factor)):
            raise ContractError(self.source, f"{key}.factor", "must be a finite non-zero number")
        if self.kind == "range":
            lo, hi = self.in_range
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
                raise ContractError(self.source, f"{key}.in", f"needs two different finite numbers, got {[lo, hi]}")
            if self.out_range[0] == self.out_range[1]:
                raise ContractError(self.source, f"{key}.out", "needs two different numbers")

    def converter_for(self, joint: str | None, registry: Mapping[str, UnitConverter]) -> UnitConverter:
        """The leaf converter used for `joint` (resolves ``per_joint``)."""
        if self.kind != "per_joint":
            return self
        name = self.joints.get(joint, self.default) if joint is not None else self.default
        return registry[name].converter_for(joint, registry)

    def apply(self, values: FloatArray) -> FloatArray:
        """Convert values from ROS units to dataset units (leaf converters only)."""
        if self.kind == "scale":
            return values * self.factor + self.offset
        if self.kind == "range":
            (a, b), (c, d) = self.in_range, self.out_range
            out = (values - a) * ((d - c) / (b - a)) + c
            return np.clip(out, min(c, d), max(c, d)) if self.clip else out
        return values

    def inverse(self, values: FloatArray) -> FloatArray:
        """Convert values from dataset units back to ROS units (leaf converters only)."""
        if self.kind == "scale":
            return (values - self.offset) / self.factor
        if self.kind == "range":
            (a, b), (c, d) = self.in_range, self.out_range
            return (values - c) * ((b - a) / (d - c)) + a
        return values


BUILTIN: dict[str, UnitConverter] = {
    "identity": UnitConverter("identity", "identity", source="<builtin>"),
    "rad_to_deg": UnitConverter("rad_to_deg", "scale", factor=180.0 / math.pi, source="<builtin>"),
    "deg_to_rad": UnitConverter("deg_to_rad", "scale", factor=math.pi / 180.0, source="<builtin>"),
}


def _pair(source: str, key: str, value: object) -> tuple[float, float]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise ContractError(source, key, f"must be a list of two numbers, got {value!r}")
    try:
        return float(value[0]), float(value[1])
    except (TypeError, ValueError):
        raise ContractError(source, key, f"must be a list of two numbers, got {value!r}") from None


def _number(source: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ContractError(source, key, f"must be a number, got {value!r}")
    return float(value)


def parse_units(source: str, raw: object) -> dict[str, UnitConverter]:
    """Parse the contract's top-level ``units:`` mapping (plus the built-in converters)."""
    registry = dict(BUILTIN)
    if raw is None:
        return registry
    if not isinstance(raw, Mapping):
        raise ContractError(source, "units", "must be a mapping of converter name -> definition")
    allowed = {"kind", "factor", "offset", "in", "out", "clip", "joints", "default"}
    for name, spec in raw.items():
        key = f"units.{name}"
        if name in BUILTIN:
            raise ContractError(source, key, f"{name!r} is built in; choose another name")
        if not isinstance(spec, Mapping):
            raise ContractError(source, key, "must be a mapping with a `kind`")
        if unknown := sorted(set(spec) - allowed):
            raise ContractError(source, f"{key}.{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(allowed))}")
        kind = spec.get("kind")
        if not isinstance(kind, str):
            raise ContractError(source, f"{key}.kind", f"missing; use one of {', '.join(KINDS)}")
        joints = spec.get("joints", {})
        if not isinstance(joints, Mapping) or not all(isinstance(v, str) for v in joints.values()):
            raise ContractError(source, f"{key}.joints", "must map joint names to converter names")
        clip = spec.get("clip", True)
        if not isinstance(clip, bool):
            raise ContractError(source, f"{key}.clip", "must be true or false")
        registry[str(name)] = UnitConverter(
            name=str(name),
            kind=kind,
            factor=_number(source, f"{key}.factor", spec.get("factor", 1.0)),
            offset=_number(source, f"{key}.offset", spec.get("offset", 0.0)),
            in_range=_pair(source, f"{key}.in", spec["in"]) if "in" in spec else (0.0, 1.0),
            out_range=_pair(source, f"{key}.out", spec["out"]) if "out" in spec else (0.0, 1.0),
            clip=clip,
            joints={str(k): v for k, v in joints.items()},
            default=str(spec.get("default", "identity")),
            source=source,
        )
        if kind == "range" and ("in" not in spec or "out" not in spec):
            raise ContractError(source, key, "a `range` converter needs `in: [min, max]` and `out: [min, max]`")
    for conv in registry.values():
        if conv.kind != "per_joint":
            continue
        for ref_key, ref in [("default", conv.default), *((f"joints.{j}", n) for j, n in conv.joints.items())]:
            if ref not in registry:
                raise ContractError(source, f"units.{conv.name}.{ref_key}", f"unknown converter {ref!r}")
            if registry[ref].kind == "per_joint":
                raise ContractError(source, f"units.{conv.name}.{ref_key}", "per_joint converters cannot nest")
    return registry


@dataclass(frozen=True)
class JointUnits:
    """The resolved per-joint conversion of one feature, applied to whole vectors."""

    converters: tuple[UnitConverter, ...]

    def apply(self, values: FloatArray) -> FloatArray:
        """ROS units -> dataset units, element-wise per joint."""
        if all(c.kind == "identity" for c in self.converters):
            return values
        out = np.empty_like(values)
        for i, conv in enumerate(self.converters):
            out[..., i] = conv.apply(values[..., i])
        return out

    def inverse(self, values: FloatArray) -> FloatArray:
        """Dataset units -> ROS units, element-wise per joint."""
        out = np.empty_like(values)
        for i, conv in enumerate(self.converters):
            out[..., i] = conv.inverse(values[..., i])
        return out
