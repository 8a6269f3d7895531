"""Finding cameras and their modes, like LeRobot's `lerobot-find-cameras opencv`.

On Linux the V4L2 device nodes (`/dev/video*`) are listed with their names from sysfs and the stable
`/dev/v4l/by-id` links pointing at them; elsewhere OpenCV indices 0..max_index are tried.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from lerobot_drivers.cameras.errors import CameraError
from lerobot_drivers.cameras.sources import CameraMode, CameraRequest, OpenCVSource


@dataclass
class FoundCamera:
    """A camera that opened: how to address it, what it is, what it delivers."""

    device: str
    name: str = ""
    stable_paths: list[str] = field(default_factory=list)
    default_mode: CameraMode | None = None
    modes: list[CameraMode] = field(default_factory=list)
    error: str = ""


def _index(device: str) -> int:
    match = re.search(r"(\d+)$", device)
    return int(match.group(1)) if match else -1


def candidate_devices(dev_glob: str = "/dev/video*", max_index: int = 10) -> list[str]:
    """Device paths on Linux (sorted by number), else the indices ``0``..``max_index - 1``."""
    if sys.platform.startswith("linux"):
        return sorted(glob.glob(dev_glob), key=_index)
    return [str(i) for i in range(max_index)]


def _stable_paths(device: str, by_dirs: tuple[str, ...] = ("/dev/v4l/by-id", "/dev/v4l/by-path")) -> list[str]:
    real = os.path.realpath(device)
    return sorted(p for d in by_dirs for p in glob.glob(f"{d}/*") if os.path.realpath(p) == real)


def _sysfs_name(device: str) -> str:
    path = Path("/sys/class/video4linux") / Path(device).name / "name"
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def inspect_camera(device: str, probe: bool = True) -> FoundCamera:
    """Open `device` and read its default mode (and, with `probe`, the modes it accepts)."""
    found = FoundCamera(device, _sysfs_name(device), _stable_paths(device) if device.startswith("/dev/") else [])
    source = OpenCVSource(device, CameraRequest())
    try:
        found.default_mode = source.open()
        if probe:
            found.modes = source.supported_modes()
    except CameraError as err:
        found.error = str(err)
    finally:
        source.close()
    return found


def find_cameras(devices: list[str], probe: bool = True) -> list[FoundCamera]:
    """Every device of `devices` that is a camera (V4L2 metadata nodes that do not open are skipped)."""
    cameras = []
    for device in devices:
        found = inspect_camera(device, probe)
        if found.default_mode is not None or (found.error and "does not support" in found.error):
            cameras.append(found)
    return cameras
