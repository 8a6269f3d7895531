"""The ROS camera of LeRobot's camera plugin (`lerobot_camera_ros.core.TopicCamera`) on an image topic published
by the test, in the project's own venv: the newest image by the alignment rule, new frames for async_read, one-line
errors for a wrong size or a silent topic."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from lerobot_camera_ros.core import TopicCamera
from lerobot_robot_ros.link import RosLinkError

TOPIC = "/cameras/test/image_raw"


class ImageStream:
    """rgb8 images at 30 Hz, each filled with its index (mod 256), stamped now; remembers (stamp, index)."""

    def __init__(self, node: Any, width: int = 32, height: int = 24) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image

        self.sent: list[tuple[int, int]] = []
        self._node, self._image, self._size = node, Image, (width, height)
        qos = QoSProfile(depth=2, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._publisher = node.create_publisher(Image, TOPIC, qos)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        width, height = self._size
        index = 0
        while not self._stop.wait(1 / 30):
            index += 1
            now = self._node.get_clock().now()
            msg = self._image(height=height, width=width, encoding="rgb8", step=width * 3)
            msg.header.stamp = now.to_msg()
            msg.data = bytes([index % 256]) * (width * height * 3)
            self.sent.append((now.nanoseconds, index % 256))
            self._publisher.publish(msg)

    def value_at(self, t_ns: int) -> int:
        return [value for stamp, value in list(self.sent) if stamp <= t_ns][-1]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.mark.ros
def test_camera_reads_the_newest_image_of_the_topic(ros_node) -> None:
    stream = ImageStream(ros_node)
    camera = TopicCamera(TOPIC, 32, 24, fps=30, connect_timeout_s=30)
    try:
        camera.connect()
        for _ in range(5):
            image = camera.read()
            assert image.shape == (24, 32, 3) and image.dtype == np.uint8
            assert camera._last_ns is not None
            assert (image == stream.value_at(camera._last_ns)).all()
            before = camera._last_ns
            camera.async_read(2.0)
            assert camera._last_ns > before  # a frame not returned before
        camera.disconnect()
        assert not camera.is_connected
        wrong = TopicCamera(TOPIC, 64, 48, fps=30, connect_timeout_s=30)
        wrong.connect()
        try:
            with pytest.raises(RosLinkError) as err:
                wrong.read()
            assert "\n" not in str(err.value) and "32x24 images but the contract declares shape [48, 64, 3]" in str(
                err.value
            )
        finally:
            wrong.disconnect()
    finally:
        stream.stop()


@pytest.mark.ros
def test_silent_camera_topic_is_one_line(ros_domain) -> None:
    camera = TopicCamera("/cameras/none/image_raw", 32, 24, connect_timeout_s=1.0)
    with pytest.raises(RosLinkError) as err:
        camera.connect()
    assert "\n" not in str(err.value) and "no message on /cameras/none/image_raw" in str(err.value)


@pytest.mark.ros
def test_read_latest_peeks_without_waiting_and_refuses_a_stale_image(ros_node) -> None:
    """LeRobot 0.6's Camera.read_latest(): the newest image at once, not marked as returned (async_read still
    returns it), TimeoutError once the newest image is older than the limit (the topic stopped)."""
    stream = ImageStream(ros_node)
    camera = TopicCamera(TOPIC, 32, 24, fps=30, connect_timeout_s=30)
    try:
        camera.connect()
        image = camera.read_latest(max_age_s=0.5)
        assert image.shape == (24, 32, 3) and image.dtype == np.uint8
        assert camera._last_ns is None  # a peek: nothing marked as returned
        assert int(image[0, 0, 0]) in {value for _, value in list(stream.sent)}
        camera.async_read(2.0)
        stream.stop()
        newest = camera._link_open().newest_frame()
        assert newest is not None
        with pytest.raises(TimeoutError) as err:
            while True:  # the newest image ages past 50 ms now that nothing is published
                camera.read_latest(max_age_s=0.05)
        assert "\n" not in str(err.value) and f"camera {TOPIC}: newest image is" in str(err.value)
        assert (camera.read_latest(max_age_s=3600) == stream.value_at(newest.time_ns)).all()
    finally:
        stream.stop()
        camera.disconnect()
