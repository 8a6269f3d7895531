"""The sim bridge renders a camera only while its image topic has a subscriber (`lazy_cameras`, the default):
rendering is most of a step's CPU, and a policy that reads no image should not pay for it."""

from __future__ import annotations

import time

from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import CameraInfo, Image

from lerobot_sim_bridge import topics
from tests.lerobot_sim_bridge.conftest import in_process_bridge


def _wait_for_subscribers(node, count: int, publishers: str = "_image_pubs") -> None:
    publisher = getattr(node, publishers)["front"]
    deadline = time.monotonic() + 30.0
    while publisher.get_subscription_count() != count:
        assert time.monotonic() < deadline, f"{publisher.topic_name} never had {count} subscriber(s)"
        time.sleep(0.01)


def _steps(node, n: int) -> int:
    """Rendered frames of `n` steps."""
    before = node._frames_rendered["front"]
    for _ in range(n):
        node._step_once()
    return node._frames_rendered["front"] - before


def test_a_camera_is_rendered_only_while_its_topic_has_a_subscriber(ros_domain, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    with in_process_bridge(ros_domain, cameras="front:64x48") as node:
        assert _steps(node, 3) == 0
        subscription = node.create_subscription(Image, topics.image_topic("front"), lambda _msg: None, 10)
        _wait_for_subscribers(node, 1)
        assert _steps(node, 3) == 3
        node.destroy_subscription(subscription)
        _wait_for_subscribers(node, 0)
        assert _steps(node, 3) == 0


def test_lazy_cameras_false_renders_every_step(ros_domain, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    with in_process_bridge(ros_domain, cameras="front:64x48", lazy_cameras=False) as node:
        assert _steps(node, 3) == 3


def test_camera_info_goes_to_its_own_subscriber_without_rendering(ros_domain, monkeypatch):
    """A node that reads only the calibration (camera_info) gets it every step; the image is not rendered for it."""
    monkeypatch.setenv("MUJOCO_GL", "egl")
    with in_process_bridge(ros_domain, cameras="front:64x48") as node:
        received = []
        node.create_subscription(CameraInfo, topics.camera_info_topic("front"), received.append, 10)
        _wait_for_subscribers(node, 1, publishers="_info_pubs")
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(node)
        stamps = []
        for _ in range(3):
            snap = node._step_once()
            node._publish(snap)
            stamps.append(snap.stamp)
        deadline = time.monotonic() + 30.0
        while len(received) < 3 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        executor.shutdown()
        assert node._frames_rendered["front"] == 0
        assert [(m.width, m.height, m.header.stamp) for m in received] == [(64, 48, stamp) for stamp in stamps]
