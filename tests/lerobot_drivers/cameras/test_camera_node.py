"""The camera node as a separate process: synthetic and video sources, JPEG, reconnect, stall, bad input."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from lerobot_drivers.cameras.pattern import make_pattern, read_pattern
from lerobot_ros.testing import venv_script, wait_for_messages

pytestmark = pytest.mark.ros

NS = "/cameras/front"


def camera(processes, *params: str, name: str = "camera"):
    args = [venv_script("camera"), "--ros-args", "-r", f"__ns:={NS}"]
    for p in params:
        args += ["-p", p]
    return processes.start(args, name=name)


class Frames:
    """Collects (counter, pixel time ms, header stamp ms) of image_raw and the camera's /diagnostics."""

    def __init__(self, node, topic: str = f"{NS}/image_raw", compressed: bool = False) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import CompressedImage, Image

        from lerobot_ros.images import decode_compressed, image_to_rgb

        self.lock = threading.Lock()
        self.frames: list[tuple[int, int, int]] = []
        self.diagnostics: list = []
        decode = decode_compressed if compressed else image_to_rgb

        def on_image(msg) -> None:
            counter, pixel_ms = read_pattern(decode(msg))
            stamp_ms = msg.header.stamp.sec * 1000 + msg.header.stamp.nanosec // 1_000_000
            with self.lock:
                self.frames.append((counter, pixel_ms, stamp_ms))

        def on_diag(msg) -> None:
            with self.lock:
                self.diagnostics.extend(s for s in msg.status if s.name.startswith(NS))

        node.create_subscription(CompressedImage if compressed else Image, topic, on_image, 10)
        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)

    def wait(self, count: int, timeout: float = 30.0) -> list[tuple[int, int, int]]:
        start = len(self.frames)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.frames) - start >= count:
                    return self.frames[start : start + count]
            time.sleep(0.02)
        raise AssertionError(f"got {len(self.frames) - start}/{count} frames within {timeout} s")

    def wait_diag(self, predicate, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for status in reversed(self.diagnostics):
                    values = {kv.key: kv.value for kv in status.values}
                    if predicate(status, values):
                        return status, values
            time.sleep(0.05)
        raise AssertionError(f"no matching diagnostics within {timeout} s; last: {self.diagnostics[-1:]}")


def test_synthetic_camera_publishes_ordered_stamped_frames_and_jpeg(processes, ros_node) -> None:
    from sensor_msgs.msg import CameraInfo, Image

    cam = camera(processes, "device:=synthetic", "width:=320", "height:=240", "fps:=30.0", "publish_compressed:=true")
    raw = Frames(ros_node)
    jpeg = Frames(ros_node, f"{NS}/image_raw/compressed", compressed=True)
    frames = raw.wait(30)
    counters = [f[0] for f in frames]
    assert counters == sorted(counters) and len(set(counters)) == len(counters)
    # stamp = capture time: the time the source wrote into the pixels at capture
    assert all(stamp % 2**32 == pixel for _, pixel, stamp in frames)
    compressed = jpeg.wait(10)
    assert all(stamp % 2**32 == pixel for _, pixel, stamp in compressed)
    assert {c for c, _, _ in compressed} & set(range(counters[0], counters[-1] + 40))
    (info,) = wait_for_messages(ros_node, CameraInfo, f"{NS}/camera_info", timeout=20)
    assert (info.width, info.height) == (320, 240)
    (image,) = wait_for_messages(ros_node, Image, f"{NS}/image_raw", timeout=20)
    assert (image.encoding, image.width, image.height, image.step) == ("rgb8", 320, 240, 960)
    _, values = raw.wait_diag(lambda s, v: int(v["frames_captured"]) > 30)
    assert values["mode"] == "320x240@30" and float(values["fps"]) > 0
    assert int(values["frames_dropped"]) >= 0 and values["connected"] == "true"
    assert cam.returncode is None


def test_camera_reconnects_and_reports_a_stall(processes, ros_node, tmp_path: Path) -> None:
    from diagnostic_msgs.msg import DiagnosticStatus

    presence = tmp_path / "video0"
    presence.write_text("present")
    cam = camera(
        processes,
        f"device:=synthetic:{presence}",
        "width:=160",
        "height:=120",
        "fps:=20.0",
        "reconnect_period:=0.2",
        "stall_timeout:=1.0",
        "diagnostics_period:=0.5",
    )
    frames = Frames(ros_node)
    before = frames.wait(5)
    presence.unlink()
    cam.wait_for_output(r"camera lost: .*disappeared", timeout=30)
    frames.wait_diag(lambda s, v: v["connected"] == "false" and s.level == DiagnosticStatus.ERROR)
    presence.write_text("present")
    cam.wait_for_output(r"camera back", timeout=30)
    after = frames.wait(5)
    assert after[0][0] > before[-1][0]
    frames.wait_diag(lambda s, v: v["reconnects"] == "1" and s.level == DiagnosticStatus.OK)
    presence.write_text("stall")
    cam.wait_for_output(r"camera stalled: no frame for 1.0 s \(connected but delivering no frames\)", timeout=30)
    frames.wait_diag(lambda s, v: s.message.startswith("stalled"))
    presence.write_text("present")
    cam.wait_for_output(r"delivers frames again", timeout=30)
    frames.wait(3)


def test_video_file_camera(processes, ros_node, tmp_path: Path) -> None:
    import cv2

    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (128, 96))
    for i in range(4):
        writer.write(make_pattern(i, 0, 128, 96)[:, :, ::-1].copy())
    writer.release()
    camera(processes, f"device:={video}", "fps:=10.0")
    frames = Frames(ros_node).wait(10)
    counters = [c for c, _, _ in frames]
    # the file's 4 frames in order, looping; never a repeat (a dropped frame skips ahead)
    assert set(counters) <= {0, 1, 2, 3} and len(set(counters)) >= 3
    assert all((b - a) % 4 != 0 for a, b in itertools.pairwise(counters))


def test_missing_device_and_unsupported_mode_fail_at_configure(processes, tmp_path: Path) -> None:
    missing = camera(processes, "device:=/dev/video_does_not_exist", name="missing")
    missing.wait_for_output(r"configure failed: /dev/video_does_not_exist does not exist.*cameras find", timeout=30)
    video = tmp_path / "clip.avi"
    import cv2

    writer = cv2.VideoWriter(str(video), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (128, 96))
    writer.write(make_pattern(0, 0, 128, 96)[:, :, ::-1].copy())
    writer.release()
    wrong = camera(processes, f"device:={video}", "width:=640", "height:=480", name="wrong_mode")
    wrong.wait_for_output(r"configure failed: .* is 128x96, not 640x480", timeout=30)
