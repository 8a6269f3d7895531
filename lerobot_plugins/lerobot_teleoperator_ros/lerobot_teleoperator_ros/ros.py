"""`RosTeleoperator`: LeRobot's `Teleoperator` API over `ContractLeader` (a leader arm's ROS JointState topic).

The leader's driver owns its calibration: `is_calibrated` is True and `calibrate()` does nothing. There is no
force feedback: `feedback_features` is empty.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any

from lerobot.teleoperators.teleoperator import Teleoperator
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_teleoperator_ros.config_ros import RosTeleoperatorConfig
from lerobot_teleoperator_ros.core import ContractLeader

logger = logging.getLogger(__name__)


class RosTeleoperator(Teleoperator):
    """See the module docstring and `ContractLeader`."""

    config_class = RosTeleoperatorConfig
    name = "ros"

    def __init__(self, config: RosTeleoperatorConfig) -> None:
        super().__init__(config)
        self.config = config
        self.leader = ContractLeader(
            config.contract,
            topic=config.topic,
            connect_timeout_s=config.connect_timeout_s,
            action_timeout_s=config.action_timeout_s,
        )

    @cached_property
    def action_features(self) -> dict[str, type]:
        return self.leader.action_features

    @cached_property
    def feedback_features(self) -> dict[str, type]:
        return {}

    @property
    def is_connected(self) -> bool:
        return self.leader.is_connected

    def connect(self, calibrate: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        self.leader.connect()
        logger.info("%s connected to %s", self, self.leader.feature.topic)

    @property
    def is_calibrated(self) -> bool:
        """True: the leader's ROS driver applies its own calibration."""
        return True

    def calibrate(self) -> None:
        """Nothing to do here: the leader's ROS driver owns the calibration (lerobot-ros calibrate)."""
        logger.info("%s: calibration lives with the ROS driver (lerobot-ros calibrate); nothing to do", self)

    def configure(self) -> None:
        """Nothing to configure: the ROS driver owns the motors' settings."""

    def get_action(self) -> dict[str, Any]:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        return self.leader.get_action()

    def send_feedback(self, feedback: dict[str, Any]) -> None:
        """No feedback: a ROS leader arm is read only."""

    def disconnect(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        self.leader.disconnect()
