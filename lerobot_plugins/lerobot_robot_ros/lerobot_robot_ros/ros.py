"""`RosRobot`: LeRobot's `Robot` API over `ContractRobot` (a ROS 2 robot described by a lerobot-ros contract).

Calibration lives with the ROS driver (its calibration file, `lerobot-ros calibrate`): `is_calibrated` is True and
`calibrate()` does nothing.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any

from lerobot.robots.robot import Robot
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_robot_ros.config_ros import RosRobotConfig
from lerobot_robot_ros.core import ContractRobot

logger = logging.getLogger(__name__)


class RosRobot(Robot):
    """See the module docstring and `ContractRobot`."""

    config_class = RosRobotConfig
    name = "ros"

    def __init__(self, config: RosRobotConfig) -> None:
        super().__init__(config)
        self.config = config
        self.robot = ContractRobot(
            config.contract,
            robot_config=config.robot_config or None,
            executor_name=config.executor_name,
            connect_timeout_s=config.connect_timeout_s,
            observation_timeout_s=config.observation_timeout_s,
        )
        # lerobot-record sizes its image writers by this: one entry per camera.
        self.cameras = self.robot.features.cameras

    @cached_property
    def observation_features(self) -> dict[str, Any]:
        return self.robot.features.observation_features

    @cached_property
    def action_features(self) -> dict[str, type]:
        return self.robot.features.action_features

    @property
    def is_connected(self) -> bool:
        return self.robot.is_connected

    def connect(self, calibrate: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        self.robot.connect()
        topics = sorted({self.robot.contract.features[k].topic for k in self.robot.features.observations})
        logger.info("%s connected to %s (contract %s)", self, ", ".join(topics), self.robot.contract.source)

    @property
    def is_calibrated(self) -> bool:
        """True: a ROS robot's driver applies its own calibration before it publishes joint states."""
        return True

    def calibrate(self) -> None:
        """Nothing to do here: the ROS driver owns the calibration (calibrate with lerobot-ros calibrate)."""
        logger.info("%s: calibration lives with the ROS driver (lerobot-ros calibrate); nothing to do", self)

    def configure(self) -> None:
        """Nothing to configure: the ROS driver owns the motors' settings."""

    def get_observation(self) -> dict[str, Any]:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        return self.robot.get_observation()

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        return self.robot.send_action(action)

    def disconnect(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        self.robot.disconnect()
        logger.info("%s disconnected (left the ROS graph): %s", self, self.robot.summary())
