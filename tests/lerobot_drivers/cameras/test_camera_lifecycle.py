"""Camera node lifecycle transitions in-process: configure/activate/deactivate/reactivate/cleanup, bad device."""

from __future__ import annotations

import time

import pytest
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from lerobot_drivers.nodes.camera import CameraNode

pytestmark = pytest.mark.ros


def _node(ros_node, device: str) -> CameraNode:
    params = [Parameter("device", value=device), Parameter("width", value=64), Parameter("height", value=16)]
    return CameraNode(context=ros_node.context, parameter_overrides=params, namespace="/lifecycle_test")


def _published_after(node: CameraNode, count: int, timeout: float = 20.0) -> int:
    start = node._published
    deadline = time.monotonic() + timeout
    while node._published - start < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"published {node._published - start}/{count} frames in {timeout} s")
        time.sleep(0.02)
    return node._published


def test_transitions_start_and_stop_publishing_and_reopen_the_device(ros_node) -> None:
    node = _node(ros_node, "synthetic")
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node._published == 0
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        _published_after(node, 5)
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        stopped = node._published
        time.sleep(0.3)
        assert node._published == stopped
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS  # the device is reopened
        _published_after(node, 5)
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        assert node._source is None and node._pubs == {}
    finally:
        node.release()
        node.destroy_node()


def test_configure_fails_on_a_missing_device(ros_node, tmp_path) -> None:
    node = _node(ros_node, str(tmp_path / "video9"))
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    finally:
        node.destroy_node()
