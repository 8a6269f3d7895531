"""Frame sources behind one interface: OpenCV devices, video files and the synthetic pattern.

A source is opened, read frame by frame (blocking, in the capture thread) and closed; it may be reopened
after a disconnect. Frames are (H, W, 3) RGB uint8 arrays stamped with the wall-clock time in ns at which
the frame was captured (for OpenCV: when `read` returned it, the closest this API gets).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_drivers.cameras.errors import CameraDisconnectedError, CameraNotFoundError, UnsupportedModeError
from lerobot_drivers.cameras.pattern import make_pattern

UInt8Image = npt.NDArray[np.uint8]
FOURCCS = ("MJPG", "YUYV")
COMMON_SIZES = ((320, 240), (640, 480), (800, 600), (1024, 768), (1280, 720), (1920, 1080))


@dataclass(frozen=True)
class CameraMode:
    """What a camera delivers: size, rate and pixel format (`fourcc` is empty where it does not apply)."""

    width: int
    height: int
    fps: float
    fourcc: str = ""

    def __str__(self) -> str:
        fourcc = f" {self.fourcc}" if self.fourcc else ""
        return f"{self.width}x{self.height}@{self.fps:g}{fourcc}"


@dataclass(frozen=True)
class CameraRequest:
    """What the user asked for; 0 / empty means "the device's default"."""

    width: int = 0
    height: int = 0
    fps: float = 0.0
    fourcc: str = ""
    exposure: float = -1.0  # < 0: automatic

    def __post_init__(self) -> None:
        if self.width < 0 or self.height < 0 or self.fps < 0:
            raise ValueError(f"width, height and fps must be >= 0, got {self.width}x{self.height}@{self.fps}")
        if (self.width == 0) != (self.height == 0):
            raise ValueError("width and height must be given together (or both 0 for the device default)")
        if self.fourcc and self.fourcc not in FOURCCS:
            raise ValueError(f"fourcc must be one of {', '.join(FOURCCS)} (or empty), got {self.fourcc!r}")


@dataclass(frozen=True)
class CapturedFrame:
    """One frame as the source delivered it."""

    image: UInt8Image
    stamp_ns: int


class FrameSource(ABC):
    """A camera-like source of RGB frames."""

    @property
    @abstractmethod
    def description(self) -> str:
        """What this source is, for logs and diagnostics (device path, file, `synthetic`)."""

    @abstractmethod
    def open(self) -> CameraMode:
        """Open the device and apply the request; raises CameraNotFoundError / UnsupportedModeError."""

    @abstractmethod
    def read(self, timeout_s: float) -> CapturedFrame | None:
        """The next frame; None when none came within `timeout_s`; CameraDisconnectedError when the device is gone."""

    @abstractmethod
    def close(self) -> None:
        """Release the device (idempotent)."""


class _Pacer:
    """Sleeps so that frames come out at `fps`, without drifting and without bursts after a pause."""

    def __init__(self, fps: float) -> None:
        self.period = 1.0 / fps
        self._next = time.monotonic()

    def wait(self, timeout_s: float, stop: threading.Event) -> bool:
        now = time.monotonic()
        if self._next - now > timeout_s:
            stop.wait(timeout_s)
            return False
        if self._next > now:
            stop.wait(self._next - now)
        now = time.monotonic()
        self._next = max(self._next + self.period, now - self.period)
        return not stop.is_set()


class SyntheticSource(FrameSource):
    """The counter pattern (`pattern.make_pattern`) at a fixed rate.

    `presence_file` models a device node that can disappear: while set, the source exists only while that
    file exists, and a file whose text starts with ``stall`` makes the source deliver nothing (a hung camera).
    """

    def __init__(self, request: CameraRequest, presence_file: str = "") -> None:
        self.mode = CameraMode(request.width or 640, request.height or 480, request.fps or 30.0, "")
        self.presence_file = presence_file
        self._counter = 0
        self._pacer = _Pacer(self.mode.fps)
        self._stop = threading.Event()
        self._open = False

    @property
    def description(self) -> str:
        return f"synthetic ({self.presence_file})" if self.presence_file else "synthetic"

    def _state(self) -> str:
        if not self.presence_file:
            return "present"
        try:
            return "stall" if Path(self.presence_file).read_text().startswith("stall") else "present"
        except FileNotFoundError:
            return "absent"

    def open(self) -> CameraMode:
        if self._state() == "absent":
            raise CameraNotFoundError(
                f"synthetic camera: {self.presence_file} does not exist (the simulated device is unplugged)"
            )
        self._open = True
        self._stop.clear()
        return self.mode

    def read(self, timeout_s: float) -> CapturedFrame | None:
        if not self._open:
            raise CameraDisconnectedError("synthetic camera is not open")
        if not self._pacer.wait(timeout_s, self._stop):
            return None
        state = self._state()
        if state == "absent":
            raise CameraDisconnectedError(f"synthetic camera: {self.presence_file} disappeared")
        if state == "stall":
            return None
        stamp_ns = time.time_ns()
        image = make_pattern(self._counter, stamp_ns // 1_000_000, self.mode.width, self.mode.height)
        self._counter += 1
        return CapturedFrame(image, stamp_ns)

    def close(self) -> None:
        self._open = False
        self._stop.set()


def _fourcc_text(code: float) -> str:
    value = int(code)
    return "".join(chr((value >> (8 * i)) & 0xFF) for i in range(4)).strip("\x00 ")


class OpenCVSource(FrameSource):
    """A V4L2 / AVFoundation / MSMF camera through OpenCV (`device`: index like ``0`` or a path like
    ``/dev/video0`` or ``/dev/v4l/by-id/...``), or a video file when `device` names a regular file.

    Video files are played at `request.fps` (default: the file's rate) and loop at the end.
    """

    def __init__(self, device: str, request: CameraRequest) -> None:
        self.device = device
        self.request = request
        self._cap: Any = None
        self._is_file = Path(device).is_file()
        self._pacer: _Pacer | None = None
        self._stop = threading.Event()

    @property
    def description(self) -> str:
        return f"video file {self.device}" if self._is_file else f"camera {self.device}"

    def _target(self) -> int | str:
        return int(self.device) if re.fullmatch(r"\d+", self.device) else self.device

    def open(self) -> CameraMode:
        import cv2

        target = self._target()
        if isinstance(target, str) and not Path(target).exists():
            raise CameraNotFoundError(
                f"{target} does not exist; list the cameras with `lerobot-ros cameras find` "
                "(a camera that was unplugged comes back under the same /dev/v4l/by-id path)"
            )
        self._is_file = isinstance(target, str) and Path(target).is_file()
        backend = cv2.CAP_V4L2 if sys.platform.startswith("linux") and not self._is_file else cv2.CAP_ANY
        cap = cv2.VideoCapture(target, backend)
        if not cap.isOpened():
            cap.release()
            raise CameraNotFoundError(
                f"OpenCV cannot open {self.description}; check it with `lerobot-ros cameras find` "
                "(is another program using it? is the user in the `video` group?)"
            )
        self._cap = cap
        try:
            mode = self._file_mode() if self._is_file else self._apply_request()
        except UnsupportedModeError:
            self.close()
            raise
        self._stop.clear()
        return mode

    def _file_mode(self) -> CameraMode:
        import cv2

        cap = self._cap
        width, height = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fps = self.request.fps or float(cap.get(cv2.CAP_PROP_FPS)) or 30.0
        if self.request.width and (self.request.width, self.request.height) != (width, height):
            raise UnsupportedModeError(
                f"{self.description} is {width}x{height}, not {self.request.width}x{self.request.height}; "
                f"set width/height to {width}x{height} (or 0 for the file's size)"
            )
        self._pacer = _Pacer(fps)
        return CameraMode(width, height, fps, "")

    def _apply_request(self) -> CameraMode:
        import cv2

        cap, req = self._cap, self.request
        if req.fourcc:
            cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*req.fourcc))
        if req.width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, req.width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, req.height)
        if req.fps:
            cap.set(cv2.CAP_PROP_FPS, req.fps)
        # V4L2: auto exposure 1 = manual, 3 = aperture priority (automatic).
        manual = req.exposure >= 0
        if manual and not (cap.set(cv2.CAP_PROP_AUTO_EXPOSURE, 1) and cap.set(cv2.CAP_PROP_EXPOSURE, req.exposure)):
            raise UnsupportedModeError(f"{self.description} does not accept a manual exposure; set exposure to -1")
        actual = self._current_mode()
        wrong_size = req.width and (actual.width, actual.height) != (req.width, req.height)
        wrong_fps = req.fps and abs(actual.fps - req.fps) > 0.5
        wrong_fourcc = req.fourcc and actual.fourcc and actual.fourcc != req.fourcc
        if wrong_size or wrong_fps or wrong_fourcc:
            modes = probe_modes(cap)
            self._apply_mode(actual)
            listed = ", ".join(str(m) for m in modes) or "none found"
            wanted = CameraMode(req.width, req.height, req.fps, req.fourcc)
            raise UnsupportedModeError(
                f"{self.description} does not support {wanted} (got {actual}); it supports: {listed}"
            )
        return actual

    def _current_mode(self) -> CameraMode:
        import cv2

        cap = self._cap
        return CameraMode(
            int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
            int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            float(cap.get(cv2.CAP_PROP_FPS)),
            _fourcc_text(cap.get(cv2.CAP_PROP_FOURCC)),
        )

    def _apply_mode(self, mode: CameraMode) -> None:
        import cv2

        if mode.fourcc:
            self._cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*mode.fourcc))
        self._cap.set(cv2.CAP_PROP_FRAME_WIDTH, mode.width)
        self._cap.set(cv2.CAP_PROP_FRAME_HEIGHT, mode.height)
        self._cap.set(cv2.CAP_PROP_FPS, mode.fps)

    def read(self, timeout_s: float) -> CapturedFrame | None:
        import cv2

        cap = self._cap
        if cap is None:
            raise CameraDisconnectedError(f"{self.description} is not open")
        if self._pacer is not None and not self._pacer.wait(timeout_s, self._stop):
            return None
        ok, bgr = cap.read()
        if not ok and self._is_file:
            cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, bgr = cap.read()
        stamp_ns = time.time_ns()
        if not ok or bgr is None:
            gone = not self._is_file and isinstance(self._target(), str) and not os.path.exists(self.device)
            raise CameraDisconnectedError(
                f"{self.description} {'disappeared' if gone else 'returned no frame'} (unplugged or failing)"
            )
        rgb: UInt8Image = np.ascontiguousarray(bgr[:, :, ::-1]) if bgr.ndim == 3 else np.repeat(bgr[:, :, None], 3, 2)
        return CapturedFrame(rgb, stamp_ns)

    def supported_modes(self) -> list[CameraMode]:
        """The modes the open device accepts among common sizes (none for a video file); restores the mode."""
        if self._cap is None or self._is_file:
            return []
        current = self._current_mode()
        modes = probe_modes(self._cap)
        self._apply_mode(current)
        return modes

    def close(self) -> None:
        self._stop.set()
        if self._cap is not None:
            self._cap.release()
            self._cap = None


def probe_modes(cap: Any, sizes: tuple[tuple[int, int], ...] = COMMON_SIZES) -> list[CameraMode]:
    """The modes an open OpenCV capture accepts among common sizes and both fourccs (what it reads back)."""
    import cv2

    found: list[CameraMode] = []
    for fourcc in FOURCCS:
        for width, height in sizes:
            cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*fourcc))
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
            mode = CameraMode(
                int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
                int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
                float(cap.get(cv2.CAP_PROP_FPS)),
                _fourcc_text(cap.get(cv2.CAP_PROP_FOURCC)),
            )
            if (mode.width, mode.height) == (width, height) and mode not in found:
                found.append(mode)
    return found


def make_source(device: str, request: CameraRequest) -> FrameSource:
    """The source for a `device` parameter: ``synthetic`` or ``synthetic:<presence file>``, an index, a path."""
    if device == "synthetic" or device.startswith("synthetic:"):
        return SyntheticSource(request, device.partition(":")[2])
    if not device:
        raise CameraNotFoundError(
            "no camera device given; set `device` (an index, a /dev path, a video file or synthetic)"
        )
    return OpenCVSource(device, request)
