"""Every camera of a robot config in one process: one `camera` lifecycle node per entry.

The robot config (`config/robots/*.yaml`, a ROS 2 parameters file) lists the cameras under this node:

    /cameras/camera_group:
      ros__parameters:
        names: [front, wrist]
        front: {device: /dev/video0, width: 640, height: 480, fps: 30.0, fourcc: MJPG}
        wrist: {device: /dev/video2, width: 640, height: 480, fps: 30.0}

Camera `front` becomes node `/cameras/front/camera` publishing `/cameras/front/image_raw` etc. With
`synthetic: true` every camera is the synthetic counter pattern at its configured size and rate (no device).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from rclpy.executors import Executor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter

from lerobot_drivers.nodes.camera import CameraNode, CameraParameters
from lerobot_ros.executors import ThreadPoolExecutor
from lerobot_ros.node_kit.parameters import ParameterTable, param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_node

# per-camera settings taken from the config: these parameters of the camera node, as `<name>.<setting>`
CAMERA_SETTINGS = ParameterTable.of(CameraParameters).only(
    ["device", "width", "height", "fps", "fourcc", "exposure", "publish_raw", "publish_compressed", "jpeg_quality"]
)


@dataclass(frozen=True)
class CameraGroupParameters:
    """The camera group's own parameters; each camera adds `<name>.<setting>` (CAMERA_SETTINGS)."""

    names: tuple[str, ...] | None = param(None, "the cameras, each configured by <name>.device, <name>.width, ...")
    synthetic: bool = param(False, "every camera is the synthetic counter pattern (no device)")


class CameraGroup(Node):
    """Reads the camera list; `cameras()` builds the camera nodes, `start` runs them, `release` stops them."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("camera_group", **kwargs)
        config = declare_parameters(self, CameraGroupParameters).config
        self.names: list[str] = list(config.names or ())
        self.settings: dict[str, dict[str, Any]] = {}
        for name in self.names:
            self.settings[name] = dict(declare_parameters(self, CAMERA_SETTINGS, prefix=f"{name}.").config)
            if config.synthetic:
                self.settings[name]["device"] = "synthetic"
                self.settings[name]["fourcc"] = ""
        self._cameras: list[CameraNode] = []

    def cameras(self) -> list[CameraNode]:
        """One camera node per configured camera, in namespace `/cameras/<name>`."""
        nodes = []
        for name, settings in self.settings.items():
            overrides = [Parameter(k, value=v) for k, v in settings.items()]
            nodes.append(
                CameraNode(namespace=f"/cameras/{name}", parameter_overrides=overrides, use_global_arguments=False)
            )
        return nodes

    def start(self, executor: Executor) -> None:
        """Make the camera nodes, spin them on `executor` and bring each up (one failing leaves the others)."""
        if not self.names:
            self.get_logger().warning("no cameras configured (parameter `names` is empty)")
        self._cameras = self.cameras()
        for camera in self._cameras:
            executor.add_node(camera)
            if camera.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                camera.trigger_activate()

    def release(self) -> None:
        """Stop and destroy the camera nodes (devices closed)."""
        for camera in self._cameras:
            camera.release()
            camera.destroy_node()
        self._cameras = []


def main(args: list[str] | None = None) -> int:
    return run_node(
        CameraGroup,
        "camera_group",
        args=args,
        executor=ThreadPoolExecutor,
        start=CameraGroup.start,
        shutdown=CameraGroup.release,
    )


if __name__ == "__main__":
    sys.exit(main())
