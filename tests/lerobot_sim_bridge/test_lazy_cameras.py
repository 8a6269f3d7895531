"""The sim bridge renders a camera only while its image topic has a subscriber (`lazy_cameras`, the default):
rendering is most of a step's CPU, and a policy that reads no image should not pay for it."""

from __future__ import annotations

import time

from sensor_msgs.msg import Image

from lerobot_sim_bridge import topics
from tests.lerobot_sim_bridge.conftest import in_process_bridge


def _wait_for_subscribers(node, count: int) -> None:
    publisher = node._image_pubs["front"]
    deadline = time.monotonic() + 30.0
    while publisher.get_subscription_count() != count:
        assert time.monotonic() < deadline, f"the image publisher never had {count} subscriber(s)"
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
