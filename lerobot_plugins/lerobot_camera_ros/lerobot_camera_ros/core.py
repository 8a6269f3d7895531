"""`TopicCamera`: a ROS image topic as a camera (no LeRobot import; `RosCamera` is LeRobot's face of it).

The topic is a one-feature contract (`camera_contract`), read by the same `ContractLink` as the robot plugin, so
images are decoded by the project's frame decoder (rgb8/bgr8/mono8/..., or a CompressedImage topic ending in
``/compressed``) and frames follow the alignment rule on the camera's fps grid.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract import Contract
from lerobot_robot_ros.link import ContractLink, RosLinkError

KEY = "observation.images.camera"
POLL_S = 0.002


def camera_contract(topic: str, width: int, height: int, fps: int, max_age_s: float) -> Contract:
    """A contract with one camera feature on `topic` (ContractError naming a bad topic, size or fps)."""
    msg_type = "sensor_msgs/msg/CompressedImage" if topic.endswith("/compressed") else "sensor_msgs/msg/Image"
    feature = {"topic": topic, "type": msg_type, "shape": [height, width, 3], "dtype": "video", "max_age_s": max_age_s}
    return Contract.from_dict(
        {"robot_type": "ros_camera", "fps": fps, "stamp": "header", "features": {KEY: feature}},
        source=f"camera {topic}",
    )


class TopicCamera:
    """See the module docstring. `read()` is the newest frame; `async_read()` waits for one not returned yet;
    `read_latest()` peeks at the newest frame without waiting."""

    def __init__(
        self,
        topic: str,
        width: int,
        height: int,
        fps: int = 30,
        max_age_s: float = 0.5,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.contract = camera_contract(topic, width, height, fps, max_age_s)
        self.topic = topic
        self.max_age_s = max_age_s
        self.connect_timeout_s = connect_timeout_s
        self._link: ContractLink | None = None
        self._last_ns: int | None = None

    @property
    def is_connected(self) -> bool:
        return self._link is not None and self._link.is_open

    def connect(self) -> None:
        link = ContractLink(self.contract, (KEY,), "lerobot_camera_ros")
        link.open(self.connect_timeout_s)
        self._link = link

    def _link_open(self) -> ContractLink:
        if self._link is None or not self._link.is_open:
            raise RosLinkError(f"camera {self.topic} is not connected; call connect() first")
        return self._link

    def read(self) -> npt.NDArray[np.uint8]:
        """The newest frame, (H, W, 3) uint8 RGB (RosLinkError when it is older than `max_age_s`)."""
        link = self._link_open()
        frame = link.newest_frame()
        assert frame is not None  # connect() waited for it
        age = link.frame_age_s(frame)
        if age > self.max_age_s:
            raise RosLinkError(f"camera {self.topic}: newest image is {age:.2f} s old (max_age_s {self.max_age_s:g})")
        self._last_ns = frame.time_ns
        return self._image(link, frame)

    def read_latest(self, max_age_s: float) -> npt.NDArray[np.uint8]:
        """The newest frame at once, without waiting and without marking it returned (async_read may still return
        it): TimeoutError when it is older than `max_age_s`, RuntimeError when no image has arrived yet."""
        link = self._link_open()
        frame = link.newest_frame()
        if frame is None:
            raise RuntimeError(f"camera {self.topic}: no image received yet")
        age = link.frame_age_s(frame)
        if age > max_age_s:
            limit_ms = max_age_s * 1000
            raise TimeoutError(f"camera {self.topic}: newest image is {age * 1000:.0f} ms old (max {limit_ms:g} ms)")
        return self._image(link, frame)

    def async_read(self, timeout_s: float) -> npt.NDArray[np.uint8]:
        """A frame newer than the last one returned, waiting up to `timeout_s` (TimeoutError)."""
        link = self._link_open()
        deadline = time.monotonic() + timeout_s
        while True:
            frame = link.newest_frame()
            if frame is not None and (self._last_ns is None or frame.time_ns > self._last_ns):
                self._last_ns = frame.time_ns
                return self._image(link, frame)
            if time.monotonic() > deadline:
                raise TimeoutError(f"camera {self.topic}: no new image within {timeout_s * 1000:.0f} ms")
            time.sleep(POLL_S)

    @staticmethod
    def _image(link: ContractLink, frame: Any) -> npt.NDArray[np.uint8]:
        return np.asarray(link.values(frame)[KEY], dtype=np.uint8)

    def disconnect(self) -> None:
        if self._link is not None:
            self._link.close()
        self._link = None
