"""OpenCVSource against a fake V4L2 camera (cv2.VideoCapture replaced): modes applied, unsupported ones listed."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import pytest

from lerobot_drivers.cameras.errors import CameraDisconnectedError, UnsupportedModeError
from lerobot_drivers.cameras.sources import CameraRequest, OpenCVSource

MJPG = cv2.VideoWriter.fourcc(*"MJPG")
YUYV = cv2.VideoWriter.fourcc(*"YUYV")
CAMERA_MODES = {(640, 480, MJPG): 30.0, (1280, 720, MJPG): 30.0, (640, 480, YUYV): 30.0, (1280, 720, YUYV): 10.0}


class FakeV4L2Camera:
    """Accepts only its modes, like a UVC camera: a `set` of another size snaps to the nearest one it has."""

    MODES = CAMERA_MODES

    def __init__(self, target, backend) -> None:
        self.size, self.fourcc, self.fps = (640, 480), YUYV, 30.0
        self.unplugged = False
        self.exposure_settable = True

    def isOpened(self) -> bool:
        return True

    def set(self, prop: int, value: float) -> bool:
        if prop == cv2.CAP_PROP_FOURCC:
            self.fourcc = int(value)
        elif prop == cv2.CAP_PROP_FRAME_WIDTH:
            width = int(value)
            self.size = min((m[:2] for m in self.MODES), key=lambda wh: abs(wh[0] - width))
        elif prop == cv2.CAP_PROP_FPS:
            self.fps = float(value)
        elif prop in (cv2.CAP_PROP_AUTO_EXPOSURE, cv2.CAP_PROP_EXPOSURE):
            return self.exposure_settable
        return True

    def get(self, prop: int) -> float:
        top = self.MODES.get((*self.size, self.fourcc), 5.0)
        return {
            cv2.CAP_PROP_FRAME_WIDTH: self.size[0],
            cv2.CAP_PROP_FRAME_HEIGHT: self.size[1],
            cv2.CAP_PROP_FPS: min(self.fps, top),
            cv2.CAP_PROP_FOURCC: self.fourcc,
        }.get(prop, 0.0)

    def read(self):
        if self.unplugged:
            return False, None
        return True, np.zeros((self.size[1], self.size[0], 3), np.uint8)

    def release(self) -> None:
        pass


@pytest.fixture
def fake_camera(monkeypatch):
    made: list[FakeV4L2Camera] = []

    def factory(target, backend=0):
        made.append(FakeV4L2Camera(target, backend))
        return made[-1]

    monkeypatch.setattr(cv2, "VideoCapture", factory)
    return made


def test_a_supported_mode_is_applied_and_frames_are_rgb(fake_camera) -> None:
    source = OpenCVSource("0", CameraRequest(1280, 720, 30.0, "MJPG"))
    assert str(source.open()) == "1280x720@30 MJPG"
    frame = source.read(1.0)
    assert frame is not None and frame.image.shape == (720, 1280, 3)
    modes = [str(m) for m in source.supported_modes()]
    assert "640x480@30 MJPG" in modes and "1280x720@10 YUYV" in modes
    assert fake_camera[0].size == (1280, 720)  # probing put the camera back in its mode
    fake_camera[0].unplugged = True
    with pytest.raises(CameraDisconnectedError, match="camera 0 returned no frame"):
        source.read(1.0)


def test_an_unsupported_mode_lists_what_the_camera_supports(fake_camera) -> None:
    with pytest.raises(UnsupportedModeError) as err:
        OpenCVSource("0", CameraRequest(1920, 1080, 30.0, "MJPG")).open()
    text = str(err.value)
    assert "does not support 1920x1080@30 MJPG (got 1280x720@30 MJPG)" in text
    assert "it supports: 640x480@30 MJPG, 1280x720@30 MJPG, 640x480@30 YUYV, 1280x720@10 YUYV" in text
    with pytest.raises(UnsupportedModeError, match=r"does not support 1280x720@30 YUYV \(got 1280x720@10 YUYV\)"):
        OpenCVSource("0", CameraRequest(1280, 720, 30.0, "YUYV")).open()


def test_manual_exposure_refused_by_the_device_is_reported(fake_camera, monkeypatch) -> None:
    monkeypatch.setattr(FakeV4L2Camera, "set", lambda self, prop, value: prop != cv2.CAP_PROP_EXPOSURE)
    with pytest.raises(UnsupportedModeError, match="does not accept a manual exposure; set exposure to -1"):
        OpenCVSource("0", CameraRequest(exposure=100.0)).open()


CORES = (
    "lerobot_drivers.cameras.capture",
    "lerobot_drivers.cameras.find",
    "lerobot_drivers.cameras_command",
    "lerobot_drivers.teleop.jog",
    "lerobot_drivers.teleop.gamepad",
    "lerobot_drivers.teleop.leader_follower",
)


def test_pure_cores_import_neither_rclpy_nor_opencv_nor_pygame() -> None:
    heavy = "{'rclpy', 'cv2', 'pygame'}"
    code = "\n".join([*(f"import {m}" for m in CORES), "import sys", f"assert not {heavy} & set(sys.modules)"])
    subprocess.run([sys.executable, "-c", code], check=True)
