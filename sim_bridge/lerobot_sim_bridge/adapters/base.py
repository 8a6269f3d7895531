"""The interface every simulated robot implements so the bridge can drive it at the joint level."""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from lerobot_sim_bridge.errors import InvalidConfigError

FloatArray = NDArray[np.float64]
ImageArray = NDArray[np.uint8]


@dataclass(frozen=True)
class CameraConfig:
    """One simulated camera: its name (topic `/cameras/<name>/...`) and image size in pixels."""

    name: str
    width: int = 320
    height: int = 240

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise InvalidConfigError(f"camera name {self.name!r} must be non-empty letters, digits or '_'")
        if not (16 <= self.width <= 4096 and 16 <= self.height <= 4096):
            raise InvalidConfigError(
                f"camera {self.name!r}: width/height {self.width}x{self.height} must each be within 16..4096"
            )

    @classmethod
    def parse(cls, text: str) -> CameraConfig:
        """Parse `name` or `name:WIDTHxHEIGHT` (e.g. `front:320x240`)."""
        name, _, size = text.strip().partition(":")
        if not size:
            return cls(name)
        width, sep, height = size.lower().partition("x")
        if not sep or not width.isdigit() or not height.isdigit():
            raise InvalidConfigError(f"camera spec {text!r}: expected name or name:WIDTHxHEIGHT, e.g. front:320x240")
        return cls(name, int(width), int(height))


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole intrinsics of a rendered camera (no distortion)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def from_fovy(cls, width: int, height: int, fovy_deg: float) -> CameraIntrinsics:
        """Intrinsics of an OpenGL camera with vertical field of view `fovy_deg` and square pixels."""
        focal = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
        return cls(width, height, focal, focal, width / 2.0, height / 2.0)


@dataclass(frozen=True)
class SimConfig:
    """How an adapter is built: control rate, physics substeps per control step, cameras, env options."""

    fps: float = 30.0
    substeps: int = 16
    cameras: tuple[CameraConfig, ...] = ()
    options: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (1.0 <= self.fps <= 1000.0) or not math.isfinite(self.fps):
            raise InvalidConfigError(f"fps {self.fps} must be within 1..1000")
        if not (1 <= self.substeps <= 1000):
            raise InvalidConfigError(f"substeps {self.substeps} must be within 1..1000")
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise InvalidConfigError(f"camera names must be unique, got {names}")

    @property
    def control_dt(self) -> float:
        """Simulated seconds per control step."""
        return 1.0 / self.fps


@dataclass(frozen=True)
class StepOutcome:
    """Task signals after one control step."""

    reward: float
    success: bool
    terminated: bool
    truncated: bool

    def end_reason(self, steps: int, max_steps: int) -> str:
        """Why the episode ends after this step ("" while it goes on): the bridge's and the contract env's rule.

        `max_steps` 0 means no step limit."""
        if self.success:
            return "success"
        if self.terminated:
            return "terminated"
        if self.truncated:
            return "truncated"
        if max_steps and steps >= max_steps:
            return "time_limit"
        return ""


@dataclass(frozen=True)
class ObjectPose:
    """Pose of a task object in the world frame: position (m) and quaternion (w, x, y, z)."""

    name: str
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)


class SimAdapter(abc.ABC):
    """A simulation driven by joint position targets, one control step at a time.

    Joint values are in the robot's native units (radians for revolute joints; an adapter documents
    anything else). Implementations are not thread-safe: one caller steps, resets and renders.
    """

    @property
    @abc.abstractmethod
    def joint_names(self) -> tuple[str, ...]:
        """Names of the commanded joints, in the order of every array this adapter takes or returns."""

    @property
    @abc.abstractmethod
    def joint_limits(self) -> FloatArray:
        """`(n, 2)` lower/upper limit of each joint target; targets are clipped to it."""

    @property
    @abc.abstractmethod
    def control_dt(self) -> float:
        """Simulated seconds advanced by one `step`."""

    @property
    @abc.abstractmethod
    def cameras(self) -> tuple[CameraConfig, ...]:
        """The cameras `render` accepts."""

    @abc.abstractmethod
    def reset(self, seed: int | None) -> None:
        """Start a new episode; the same seed gives the same initial state."""

    @abc.abstractmethod
    def step(self, targets: FloatArray) -> StepOutcome:
        """Hold `targets` (one per joint, already validated and finite) for one control step."""

    @abc.abstractmethod
    def joint_positions(self) -> FloatArray:
        """Measured joint positions."""

    @abc.abstractmethod
    def joint_velocities(self) -> FloatArray:
        """Measured joint velocities."""

    def joint_efforts(self) -> FloatArray:
        """Joint efforts (actuator forces); NaN where the simulation has none."""
        return np.full(len(self.joint_names), np.nan)

    @abc.abstractmethod
    def success(self) -> bool:
        """Whether the current state solves the task."""

    def object_poses(self) -> tuple[ObjectPose, ...]:
        """Privileged poses of task objects (for scripted experts); empty when there are none."""
        return ()

    @abc.abstractmethod
    def render(self, camera: str) -> ImageArray:
        """An `(height, width, 3)` uint8 RGB frame of `camera` for the current state."""

    @abc.abstractmethod
    def intrinsics(self, camera: str) -> CameraIntrinsics:
        """Pinhole intrinsics of `camera`."""

    def close(self) -> None:  # noqa: B027 - optional hook, most adapters own nothing to release
        """Release renderers and other resources."""
