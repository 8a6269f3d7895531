"""`ContractRobot`: a robot whose observations and actions are the topics of a lerobot-ros contract.

No LeRobot import: `RosRobot` (ros.py) is LeRobot's face of it; this part runs, and is tested, wherever rclpy and
the project's packages are.

* `observation_features` / `action_features` come from the contract (`RobotFeatures`), readable before connect.
* `get_observation()` returns the newest frame aligned by the project's rule (`ContractLink`: the recorder's and
  the policy node's sampler and frame decoder), in the contract's dataset units (LeRobot's: degrees, gripper
  0..100 for the shipped arm contracts).
* `send_action()` converts the action back to ROS units and publishes it on the contract's `action` topic in the
  feature's own message type (`ActionCommand`: JointState, JointTrajectory, Float64MultiArray, Twist...), first
  through the action executor's limits (joint range, max velocity) when `robot_config` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_robot_ros.command import ActionCommand
from lerobot_robot_ros.features import RobotFeatures, resolve_contract
from lerobot_robot_ros.link import ContractLink, ReadAges, RosLinkError, SamplingCounts


class ContractRobot:
    """See the module docstring.

    Args:
        contract: a preset name (`features.PRESETS`), a contract file, or a `Contract`.
        robot_config: a robot configuration (config/robots/*.yaml) giving the executor's joint limits and velocity
            limit; None: actions are published as given.
        executor_name: the section of `robot_config` to read (default `<action namespace>/action_executor`).
        connect_timeout_s: how long `connect()` waits for the first aligned observation.
        observation_timeout_s: `get_observation()` refuses a newest observation older than this.
    """

    def __init__(
        self,
        contract: str | Path | Contract,
        robot_config: str | Path | None = None,
        executor_name: str = "",
        connect_timeout_s: float = 10.0,
        observation_timeout_s: float = 1.0,
    ) -> None:
        resolved = contract if isinstance(contract, Contract) else resolve_contract(str(contract))
        self.features = RobotFeatures.from_contract(resolved)
        self.contract = resolved
        self.robot_config = robot_config
        self.executor_name = executor_name
        self.connect_timeout_s = connect_timeout_s
        self.observation_timeout_s = observation_timeout_s
        self._link: ContractLink | None = None
        self._limiter: Any = None
        self._command: ActionCommand | None = None
        self.last_observation_time_ns: int | None = None
        # How old each camera's image was when get_observation() returned it, and the alignment's counters.
        self.image_ages = ReadAges()
        self.sampling: SamplingCounts | None = None

    @property
    def is_connected(self) -> bool:
        return self._link is not None and self._link.is_open

    def connect(self) -> None:
        """Join the ROS graph and wait for the first aligned observation (RosLinkError in one line otherwise)."""
        limits = self._load_limits()  # a bad robot_config or action message fails before anything starts
        command = ActionCommand(self._action(), self.contract.fps)
        link = ContractLink(self.contract, self.features.observations, "lerobot_robot_ros")
        link.open(self.connect_timeout_s)
        try:
            link.matched_publisher(command.msg_type, self._action().topic, self.connect_timeout_s)
        except BaseException:
            link.close()
            raise
        self._link = link
        self._command = command
        if limits is not None:
            self._limiter = self._make_limiter(limits)

    def _load_limits(self) -> Any:
        if not self.robot_config:
            return None
        from lerobot_policy_node.core.robot_limits import load_robot_limits

        action = self._action()
        executor = self.executor_name or f"{action.topic.rsplit('/', 1)[0]}/action_executor"
        limits = load_robot_limits(self.robot_config, executor)
        driven = tuple(action.joints or action.names or ())
        if limits.joint_names != driven:
            raise ValueError(
                f"{self.robot_config}: limits are for joints {list(limits.joint_names)}, contract "
                f"{self.contract.source} drives {list(driven)}"
            )
        return limits

    def _make_limiter(self, limits: Any) -> Any:
        """The action executor (one-step chunks, replace blending): joint range and velocity limit per command."""
        from lerobot_policy_node.core.executor import BlendMode, ChunkExecutor, ExecutorConfig

        executor = ChunkExecutor(
            ExecutorConfig(
                joint_names=limits.joint_names,
                lower=limits.lower,
                upper=limits.upper,
                max_velocity=limits.max_velocity,
                velocity_window_s=2.0 / self.contract.fps,
                blend=BlendMode.REPLACE,
            )
        )
        # Start from the measured pose, so the first command is rate-limited from where the arm is.
        action, state = self._action(), self.contract.features.get("observation.state")
        if state is not None and not state.is_image and state.joints == action.joints:
            observation = self.get_observation()
            measured = np.array([observation[n] for n in state.dataset_names or ()], dtype=np.float64)
            executor.reset(action.joint_units().inverse(measured), self._connected().now_ns())
        return executor

    def _action(self) -> Any:
        assert self.features.action is not None  # RobotFeatures checked it
        return self.features.action

    def get_observation(self) -> dict[str, Any]:
        """The newest aligned observation: ``name: float`` per value, ``camera: (H, W, 3) uint8`` per camera."""
        link = self._connected()
        frame = link.newest_frame()
        assert frame is not None  # connect() waited for the first one
        age = link.frame_age_s(frame)
        if age > self.observation_timeout_s:
            raise RosLinkError(
                f"the newest aligned observation is {age:.2f} s old (observation_timeout_s "
                f"{self.observation_timeout_s:g}): {link.waiting()}"
            )
        self.last_observation_time_ns = frame.time_ns
        for key in self.features.cameras.values():
            self.image_ages.add(link.sample_age_s(frame, key))
        return self.features.observation(link.values(frame))

    def summary(self) -> str:
        """One line: camera image ages at read against the contract's `max_age_s`, frames dropped, late samples."""
        ages, parts = self.image_ages, []
        if ages.count:
            p50, p99 = 1000 * ages.quantile_s(0.5), 1000 * ages.quantile_s(0.99)
            line = f"{ages.count} camera images {p50:.0f} / {p99:.0f} ms old when read (p50 / p99)"
            limits = [self.contract.features[k].max_age_s for k in self.features.cameras.values()]
            limit = min((a for a in limits if a is not None), default=None)
            if limit is not None:
                line += f", {100 * ages.share_over(limit):.1f} % older than max_age_s {limit:g} s"
            parts.append(line)
        if self.sampling is not None:
            counts = self.sampling
            parts.append(
                f"frames kept {counts.frames_kept}, dropped {counts.dropped_stale} stale and "
                f"{counts.dropped_out_of_sync} out of sync_tolerance_s, {counts.late_samples} samples late for a frame"
            )
        return "; ".join(parts)

    def send_action(self, action: dict[str, Any]) -> dict[str, float]:
        """Publish `action` (dataset units) on the contract's action topic; returns the action actually sent."""
        link = self._connected()
        assert self._command is not None  # set by connect()
        feature = self._action()
        units = feature.joint_units()
        target: npt.NDArray[np.float64] = np.asarray(units.inverse(self.features.action_vector(action)), dtype=float)
        if self._limiter is not None:
            from lerobot_policy_node.core.executor import Chunk

            now = link.now_ns()
            self._limiter.submit(Chunk(now, NS // self.contract.fps, target[None, :]), now)
            target = np.asarray(self._limiter.target(now), dtype=np.float64)
        msg = self._command.message(target, link.stamp_now_ns())
        link.publisher(self._command.msg_type, feature.topic).publish(msg)
        return self.features.action_dict(units.apply(target))

    def disconnect(self) -> None:
        """Leave the ROS graph (the link's own context is shut down; the caller's rclpy is untouched)."""
        if self._link is not None:
            if self._link.is_open:
                self.sampling = self._link.counts()
            self._link.close()
        self._link = None
        self._limiter = None
        self._command = None

    def _connected(self) -> ContractLink:
        if self._link is None or not self._link.is_open:
            raise RosLinkError("the ROS robot is not connected; call connect() first")
        return self._link
