"""`--robot.type=ros`: the settings of `RosRobot`."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.robots.config import RobotConfig


@RobotConfig.register_subclass("ros")
@dataclass(kw_only=True)
class RosRobotConfig(RobotConfig):
    """A ROS 2 robot described by a lerobot-ros contract.

    Attributes:
        contract: a preset (so101, so100, koch: the real or fake-hardware arm stacks; so101_sim: the simulation;
            ros2_control_arm: /joint_states and a JointTrajectoryController; mobile_base: /odom and /cmd_vel) or
            the path of a contract file. Its `observation.*` features are the observations, its `action` feature
            takes the actions, published in its own message type (JointState, JointTrajectory, Float64MultiArray,
            Twist...).
        robot_config: a robot configuration (config/robots/*.yaml) whose executor or arm-driver section gives
            joint limits and a velocity limit: actions are then clipped and rate-limited by the action executor
            before they are published. Empty: actions go straight to the action topic.
        executor_name: the executor section of `robot_config` to read (default: `<action topic namespace>/
            action_executor`, e.g. /follower/action_executor, falling back to its arm_driver section).
        connect_timeout_s: how long `connect()` waits for the first aligned observation.
        observation_timeout_s: `get_observation()` refuses a newest observation older than this.
    """

    contract: str = "so101"
    robot_config: str = ""
    executor_name: str = ""
    connect_timeout_s: float = 10.0
    observation_timeout_s: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("connect_timeout_s", "observation_timeout_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"robot.{name} must be > 0 seconds, got {value}")
