"""Any gymnasium env whose action is a position target, described by a `GymEnvSpec`.

The spec says which gymnasium id to make, which observation entries are the "joint" positions the action
targets, where task objects are in the observation, and which `info` key reports success. `gym-pusht` is
the built-in example (`PUSHT`): its action is the pusher's target (x, y) in the env's 512x512 pixel frame.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lerobot_sim_bridge.adapters.base import (
    CameraConfig,
    CameraIntrinsics,
    FloatArray,
    ImageArray,
    ObjectPose,
    SimAdapter,
    SimConfig,
    StepOutcome,
)
from lerobot_sim_bridge.errors import InvalidConfigError, UnknownEnvironmentError


@dataclass(frozen=True)
class ObjectSlots:
    """Where one object's planar pose sits in a flat observation: x, y and optionally yaw (radians)."""

    x: int
    y: int
    yaw: int | None = None


@dataclass(frozen=True)
class GymEnvSpec:
    """How to drive a gymnasium env at the joint level.

    `state_key` selects a dict observation entry (None: the observation is a flat vector); `state_slice`
    then picks the joint positions out of it. `objects` index the same flat vector. `render_size_kwargs`
    name the `gym.make` keyword arguments that set the rendered image width and height.
    """

    gym_id: str
    module: str
    joint_names: tuple[str, ...]
    joint_limits: tuple[tuple[float, float], ...]
    native_fps: float
    state_slice: tuple[int, int]
    state_key: str | None = None
    objects: Mapping[str, ObjectSlots] = field(default_factory=dict)
    success_info_key: str = "is_success"
    camera: str = "top"
    camera_fovy: float = 45.0
    make_kwargs: Mapping[str, object] = field(default_factory=dict)
    render_size_kwargs: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if len(self.joint_limits) != len(self.joint_names):
            raise InvalidConfigError(
                f"{self.gym_id}: {len(self.joint_names)} joints but {len(self.joint_limits)} limits"
            )
        if self.state_slice[1] - self.state_slice[0] != len(self.joint_names):
            raise InvalidConfigError(
                f"{self.gym_id}: state_slice {self.state_slice} must span {len(self.joint_names)} values"
            )


PUSHT = GymEnvSpec(
    gym_id="gym_pusht/PushT-v0",
    module="gym_pusht",
    joint_names=("agent_x", "agent_y"),
    joint_limits=((0.0, 512.0), (0.0, 512.0)),
    native_fps=10.0,
    state_slice=(0, 2),
    objects={"block": ObjectSlots(2, 3, 4)},
    success_info_key="is_success",
    camera="top",
    make_kwargs={"obs_type": "state", "render_mode": "rgb_array"},
    render_size_kwargs=("visualization_width", "visualization_height"),
)


class GymnasiumAdapter(SimAdapter):
    """A `GymEnvSpec` env behind the `SimAdapter` interface (joint units are the env's own)."""

    def __init__(self, spec: GymEnvSpec, config: SimConfig) -> None:
        if not math.isclose(config.fps, spec.native_fps):
            raise InvalidConfigError(
                f"{spec.gym_id} steps at its own {spec.native_fps:g} Hz; set fps to {spec.native_fps:g}"
            )
        if len(config.cameras) > 1 or any(c.name != spec.camera for c in config.cameras):
            raise InvalidConfigError(
                f"{spec.gym_id} has one camera, {spec.camera!r}; got {[c.name for c in config.cameras]}"
            )
        self._spec = spec
        self._config = config
        try:
            importlib.import_module(spec.module)
            import gymnasium
        except ImportError as exc:
            raise UnknownEnvironmentError(
                f"{spec.gym_id} needs the Python module {spec.module!r} ({exc}); install its pinned package"
            ) from None
        kwargs: dict[str, Any] = dict(spec.make_kwargs)
        kwargs.update(config.options)
        if config.cameras and spec.render_size_kwargs is not None:
            kwargs[spec.render_size_kwargs[0]] = config.cameras[0].width
            kwargs[spec.render_size_kwargs[1]] = config.cameras[0].height
        try:
            # No TimeLimit: episode length is the bridge's decision (max_episode_steps).
            self._env = gymnasium.make(spec.gym_id, max_episode_steps=None, **kwargs).unwrapped
        except gymnasium.error.Error as exc:
            raise UnknownEnvironmentError(f"cannot make {spec.gym_id}: {exc}") from None
        except TypeError as exc:
            raise InvalidConfigError(f"{spec.gym_id}: bad options {sorted(config.options)}: {exc}") from None
        self._limits = np.array(spec.joint_limits, dtype=np.float64)
        self._observation: Any = None
        self._previous = np.zeros(len(spec.joint_names))
        self._velocity = np.zeros(len(spec.joint_names))
        self._success = False
        self.reset(None)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self._spec.joint_names

    @property
    def joint_limits(self) -> FloatArray:
        return self._limits.copy()

    @property
    def control_dt(self) -> float:
        return 1.0 / self._spec.native_fps

    @property
    def cameras(self) -> tuple[CameraConfig, ...]:
        return self._config.cameras

    def _flat(self) -> FloatArray:
        obs = self._observation
        if self._spec.state_key is not None:
            obs = obs[self._spec.state_key]
        return np.asarray(obs, dtype=np.float64).reshape(-1)

    def reset(self, seed: int | None) -> None:
        self._observation, _ = self._env.reset(seed=seed)
        self._success = False
        self._previous = self.joint_positions()
        self._velocity = np.zeros(len(self._spec.joint_names))

    def step(self, targets: FloatArray) -> StepOutcome:
        action = np.clip(targets, self._limits[:, 0], self._limits[:, 1]).astype(np.float32)
        before = self.joint_positions()
        self._observation, reward, terminated, truncated, info = self._env.step(action)
        self._velocity = (self.joint_positions() - before) / self.control_dt
        self._success = bool(info.get(self._spec.success_info_key, False))
        return StepOutcome(float(reward), self._success, bool(terminated), bool(truncated))

    def joint_positions(self) -> FloatArray:
        start, stop = self._spec.state_slice
        return self._flat()[start:stop].copy()

    def joint_velocities(self) -> FloatArray:
        return self._velocity.copy()

    def success(self) -> bool:
        return self._success

    def object_poses(self) -> tuple[ObjectPose, ...]:
        flat = self._flat()
        poses = []
        for name, slots in self._spec.objects.items():
            yaw = float(flat[slots.yaw]) if slots.yaw is not None else 0.0
            quat = (math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0))
            poses.append(ObjectPose(name, (float(flat[slots.x]), float(flat[slots.y]), 0.0), quat))
        return tuple(poses)

    def render(self, camera: str) -> ImageArray:
        if not any(c.name == camera for c in self._config.cameras):
            raise InvalidConfigError(
                f"camera {camera!r} is not configured; configured: {[c.name for c in self.cameras]}"
            )
        frame = self._env.render()
        return np.ascontiguousarray(frame, dtype=np.uint8)

    def intrinsics(self, camera: str) -> CameraIntrinsics:
        config = next((c for c in self._config.cameras if c.name == camera), None)
        if config is None:
            raise InvalidConfigError(f"camera {camera!r} is not configured")
        return CameraIntrinsics.from_fovy(config.width, config.height, self._spec.camera_fovy)

    def close(self) -> None:
        self._env.close()
