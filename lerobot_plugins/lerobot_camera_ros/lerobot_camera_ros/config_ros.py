"""Camera type `ros`: the settings of `RosCamera`."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.cameras.configs import CameraConfig


@CameraConfig.register_subclass("ros")
@dataclass(kw_only=True)
class RosCameraConfig(CameraConfig):
    """A ROS 2 image topic as a LeRobot camera; `width` and `height` (the topic's image size: other sizes are
    refused in one line) and `fps` (the frame grid) are required.

    Attributes:
        topic: a sensor_msgs/Image topic, or a CompressedImage topic ending in /compressed.
        max_age_s: `read()` refuses a newest image older than this.
        connect_timeout_s: how long `connect()` waits for the first image.
    """

    topic: str = "/cameras/front/image_raw"
    max_age_s: float = 0.5
    connect_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("width", "height", "fps"):
            value = getattr(self, name)
            if value is None or value <= 0:
                raise ValueError(f"camera {self.topic}: {name} must be given as a positive number, got {value}")
