"""`RosCamera`: LeRobot's `Camera` API over `TopicCamera` (a ROS image topic)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from lerobot.cameras.camera import Camera
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_camera_ros.config_ros import RosCameraConfig
from lerobot_camera_ros.core import TopicCamera


class RosCamera(Camera):
    """See the module docstring; images are RGB, (height, width, 3) uint8."""

    def __init__(self, config: RosCameraConfig) -> None:
        super().__init__(config)
        self.config = config
        assert config.width and config.height and config.fps  # RosCameraConfig checked them
        self.camera = TopicCamera(
            config.topic, config.width, config.height, config.fps, config.max_age_s, config.connect_timeout_s
        )

    def __str__(self) -> str:
        return f"RosCamera({self.config.topic})"

    @property
    def is_connected(self) -> bool:
        return self.camera.is_connected

    @staticmethod
    def find_cameras() -> list[dict[str, Any]]:
        """Not searched: name the image topic (`ros2 topic list` / `lerobot-ros topics`)."""
        return []

    def connect(self, warmup: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        self.camera.connect()

    def read(self, color_mode: Any = None) -> npt.NDArray[np.uint8]:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        return self.camera.read()

    def async_read(self, timeout_ms: float = 200) -> npt.NDArray[np.uint8]:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        return self.camera.async_read(timeout_ms / 1000)

    def read_latest(self, max_age_ms: int = 500) -> npt.NDArray[np.uint8]:
        """The newest frame without waiting (LeRobot's peek): TimeoutError when it is older than `max_age_ms`."""
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        return self.camera.read_latest(max_age_ms / 1000)

    def disconnect(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        self.camera.disconnect()
