"""The sim bridge in lockstep without ROS: one simulation as a gymnasium env in the contract's features and units.

`SimContractEnv` does in one process what the lockstep bridge and `RosRobotEnv` do over topics: an action in
dataset units is converted to radians, goes through the arm driver's `ArmController` (as the bridge's
`joint_commands` do) into one control step, and the observation is the bridge's snapshot turned into the
contract's features by the contract's own conversion (`FeatureContract.value` of the same JointState /
PoseArray the bridge would publish; camera frames as rendered). A reset takes one control period of simulated
time, an episode ends on success, termination, truncation or `max_steps`, as the bridge decides.

The simulation is built on the first `reset`, in whichever process calls it: under
`lerobot_ros.vector_env.make_vector_env` that is the worker, so each worker owns its MuJoCo model and renderer (a
GL context is never inherited across a fork; the workers are spawned). `next_seed`, set by the caller before an
episode ends, makes the env start that episode in the same `step` call that ended the previous one (no round trip
with the other envs waiting); `info["next_episode_seed"]` then names it and the returned observation is its first
one. An env with no next seed stays idle after its episode: further steps change nothing and return
`info["idle"]`, until the next `reset`.

`contract_sim_env(contract=FILE)` builds one from a contract file alone (the cameras it declares, its fps): the
trainer's periodic evaluation (`lerobot-ros train --eval-every`) names it as its env factory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from lerobot_sim_bridge import topics
from lerobot_sim_bridge.adapters import CameraConfig, SimAdapter, SimConfig, make_adapter
from lerobot_sim_bridge.errors import InvalidConfigError

ACTION_KEY = "action"


def _relative_topic(topic: str, namespace: str) -> str:
    prefix = namespace.rstrip("/") + "/"
    return topic[len(prefix) :] if namespace and topic.startswith(prefix) else topic


class SimContractEnv(gymnasium.Env[dict[str, np.ndarray], np.ndarray]):
    """One simulation behind the contract's observation and action features; see the module docstring.

    Args:
        env_id: the simulation (`make_adapter`'s id).
        contract: the contract as a dict (`Contract.to_dict()`, picklable for the workers); every `observation.*`
            feature must be one the bridge publishes (joint_states, sim/object_poses, a configured camera).
        fps, cameras, substeps: the bridge's `fps`, `cameras` and `substeps` parameters.
        max_steps: the bridge's `max_episode_steps` (0 = never).
        command_timeout: the bridge's `command_timeout` (simulated seconds).
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium's class attribute

    def __init__(
        self,
        env_id: str,
        contract: Mapping[str, Any],
        fps: float,
        cameras: str = "",
        max_steps: int = 0,
        substeps: int = 16,
        command_timeout: float = 0.5,
    ) -> None:
        from lerobot_contract import Contract

        super().__init__()
        self.contract = Contract.from_dict(dict(contract), source=str(contract.get("source", "<contract>")))
        features = self.contract.features
        if ACTION_KEY not in features or features[ACTION_KEY].is_image or not features[ACTION_KEY].joints:
            raise InvalidConfigError(f"{self.contract.source}: the sim env needs a joint '{ACTION_KEY}' feature")
        self._action = features[ACTION_KEY]
        self._namespace = self._action.topic.rsplit("/", 1)[0]
        self._cameras = tuple(CameraConfig.parse(text) for text in cameras.split(",") if text.strip())
        self._observations = {k: f for k, f in features.items() if k.startswith("observation.")}
        self._sources = {key: self._source(key) for key in self._observations}
        self._config = SimConfig(fps=fps, substeps=substeps, cameras=self._cameras)
        self._env_id = env_id
        self._max_steps = max_steps
        self._command_timeout = command_timeout
        self.observation_space = spaces.Dict({k: self._space(f) for k, f in self._observations.items()})  # type: ignore[assignment]
        self.action_space = spaces.Box(-np.inf, np.inf, (self._action.size,), dtype=np.float64)
        self.next_seed: int | None = None
        self._adapter: SimAdapter | None = None
        self._controller: Any = None
        self._sim_time = 0.0
        self._episode_steps = 0
        self._idle = False
        self._last: dict[str, np.ndarray] = {}

    def _source(self, key: str) -> str:
        feature = self._observations[key]
        relative = _relative_topic(feature.topic, self._namespace)
        if feature.is_image:
            names = [c.name for c in self._cameras if topics.image_topic(c.name) == feature.topic]
            if not names or feature.dtype == "depth":
                raise InvalidConfigError(
                    f"{key}: {feature.topic} is not a camera the sim renders (cameras: "
                    f"{', '.join(c.name for c in self._cameras) or 'none'}); add it to the cameras or drop the feature"
                )
            camera = next(c for c in self._cameras if c.name == names[0])
            if (camera.height, camera.width, 3) != feature.shape:
                raise InvalidConfigError(
                    f"{key}: the sim renders {camera.name} at {camera.width}x{camera.height}, the contract declares "
                    f"shape {list(feature.shape)}; set the camera size to match"
                )
            return f"camera:{names[0]}"
        known = {
            topics.JOINT_STATES: "sensor_msgs/msg/JointState",
            topics.SIM_OBJECT_POSES: "geometry_msgs/msg/PoseArray",
        }
        if known.get(relative) != feature.type:
            raise InvalidConfigError(
                f"{key}: {feature.topic} ({feature.type}) is not published by the sim bridge in namespace "
                f"{self._namespace or '/'}; it publishes {', '.join(f'{t} ({m})' for t, m in known.items())}"
            )
        return relative

    @staticmethod
    def _space(feature: Any) -> spaces.Space[Any]:
        if feature.is_image:
            return spaces.Box(0, 255, feature.shape, dtype=np.uint8)
        return spaces.Box(-np.inf, np.inf, (feature.size,), dtype=np.dtype(feature.dtype or "float32"))

    def _build(self) -> SimAdapter:
        from lerobot_drivers.arms.controller import ArmController, ControllerConfig

        if self._cameras:
            os.environ.setdefault("MUJOCO_GL", "egl")
        adapter = make_adapter(self._env_id, self._config)
        limits = adapter.joint_limits
        self._controller = ArmController(
            ControllerConfig(
                joint_names=adapter.joint_names,
                lower=tuple(float(x) for x in limits[:, 0]),
                upper=tuple(float(x) for x in limits[:, 1]),
                command_timeout=self._command_timeout,
            )
        )
        self._adapter = adapter
        return adapter

    def _observe(self, adapter: SimAdapter) -> dict[str, np.ndarray]:
        from geometry_msgs.msg import Pose, PoseArray
        from sensor_msgs.msg import JointState

        messages: dict[str, Any] = {}
        if topics.JOINT_STATES in self._sources.values():
            state = JointState()
            state.name = list(adapter.joint_names)
            state.position = adapter.joint_positions().tolist()
            state.velocity = adapter.joint_velocities().tolist()
            state.effort = adapter.joint_efforts().tolist()
            messages[topics.JOINT_STATES] = state
        if topics.SIM_OBJECT_POSES in self._sources.values():
            poses = PoseArray()
            for item in adapter.object_poses():
                pose = Pose()
                pose.position.x, pose.position.y, pose.position.z = item.position
                pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = item.orientation
                poses.poses.append(pose)
            messages[topics.SIM_OBJECT_POSES] = poses
        observation = {}
        for key, source in self._sources.items():
            if source.startswith("camera:"):
                observation[key] = adapter.render(source.split(":", 1)[1]).copy()
            else:
                observation[key] = self._observations[key].value(messages[source])
        self._last = observation
        return observation

    def _start(self, seed: int | None) -> dict[str, np.ndarray]:
        adapter = self._adapter or self._build()
        self._sim_time += adapter.control_dt  # a reset takes one control period, as on the bridge
        adapter.reset(seed)
        self._controller.activate(adapter.joint_positions(), self._sim_time)
        self._episode_steps = 0
        self._idle = False
        return self._observe(adapter)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode with `seed` (the simulation is built here on the first call)."""
        super().reset(seed=seed)
        return self._start(seed), {"seed": seed}

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """One control step toward `action` (dataset units); see the module docstring for episode ends."""
        adapter = self._adapter
        if adapter is None:
            raise InvalidConfigError("step() before reset(): reset the env with a seed first")
        if self._idle:
            return self._last, 0.0, True, False, {"idle": True, "is_success": False, "episode_end": ""}
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape != (self._action.size,) or not np.all(np.isfinite(values)):
            raise InvalidConfigError(f"action must be {self._action.size} finite values, got {action!r}")
        radians = [float(x) for x in self._action.joint_units().inverse(values)]
        self._controller.command(list(self._action.joints or ()), radians, self._sim_time)
        target = self._controller.update(self._sim_time, adapter.joint_positions()).target
        outcome = adapter.step(target)
        self._sim_time += adapter.control_dt
        self._episode_steps += 1
        reason = outcome.end_reason(self._episode_steps, self._max_steps)
        info: dict[str, Any] = {"is_success": outcome.success, "episode_end": reason}
        if not reason:
            return self._observe(adapter), outcome.reward, False, False, info
        terminated = reason in ("success", "terminated")
        if self.next_seed is None:
            self._idle = True
            return self._observe(adapter), outcome.reward, terminated, not terminated, info
        seed, self.next_seed = self.next_seed, None
        info["next_episode_seed"] = seed
        return self._start(seed), outcome.reward, terminated, not terminated, info

    def close(self) -> None:
        if self._adapter is not None:
            self._adapter.close()
            self._adapter = None


def contract_sim_env(
    contract: str | Path,
    env_id: str = "so101_pick_place",
    features: Sequence[str] | None = None,
    max_steps: int = 0,
) -> SimContractEnv:
    """A `SimContractEnv` for the contract file `contract` (a dataset's `meta/contract.json` or a contract YAML): at
    the contract's fps, rendering the cameras its `observation.images.*` features declare (`/cameras/<name>/...`
    at their shape). `features`: the observation keys to produce (default: every `observation.*` of the contract;
    `action` is always kept), so a policy that uses no camera renders none."""
    from lerobot_contract import load_contract

    loaded = load_contract(contract)
    keys = [k for k in loaded.features if k.startswith("observation.")] if features is None else list(features)
    selected = loaded.select([*(k for k in keys if k != ACTION_KEY), ACTION_KEY])
    cameras = []
    for feature in selected.features.values():
        parts = feature.topic.strip("/").split("/")
        if feature.is_image and len(parts) > 1 and topics.image_topic(parts[1]) == feature.topic:
            height, width = feature.shape[:2]
            cameras.append(f"{parts[1]}:{width}x{height}")
    return SimContractEnv(env_id, selected.to_dict(), float(selected.fps), ",".join(cameras), max_steps)
