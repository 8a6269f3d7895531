"""The counter pattern, the sources and the capture thread, without ROS."""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import numpy as np
import pytest

from lerobot_drivers.cameras.capture import CaptureThread
from lerobot_drivers.cameras.errors import CameraDisconnectedError, CameraNotFoundError, UnsupportedModeError
from lerobot_drivers.cameras.pattern import make_pattern, read_pattern
from lerobot_drivers.cameras.sources import CameraRequest, OpenCVSource, SyntheticSource, make_source
from lerobot_ros.images import decode_compressed, encode_jpeg


@pytest.mark.parametrize(("width", "height"), [(640, 480), (320, 240), (64, 8)])
def test_pattern_round_trip(width: int, height: int) -> None:
    for counter, time_ms in [(0, 0), (1, 2), (123456, 1796214823912 % 2**32), (2**32 - 1, 2**31)]:
        image = make_pattern(counter, time_ms, width, height)
        assert image.shape == (height, width, 3) and image.dtype == np.uint8
        assert read_pattern(image) == (counter, time_ms)


def test_pattern_survives_jpeg_and_changes_every_frame() -> None:
    for counter in (7, 1000, 65535):
        image = make_pattern(counter, counter * 33, 640, 480)
        assert read_pattern(decode_compressed(encode_jpeg(image, 50))) == (counter, counter * 33)
    assert not np.array_equal(make_pattern(1, 0, 320, 240)[100:], make_pattern(2, 0, 320, 240)[100:])
    with pytest.raises(ValueError, match="at least 64x8"):
        make_pattern(0, 0, 32, 32)


def test_synthetic_source_paces_counts_and_stamps() -> None:
    source = SyntheticSource(CameraRequest(320, 240, 50.0))
    assert str(source.open()) == "320x240@50"
    frames = [source.read(1.0) for _ in range(10)]
    source.close()
    assert all(f is not None for f in frames)
    counters = [read_pattern(f.image)[0] for f in frames if f is not None]
    assert counters == list(range(10))
    stamps = [f.stamp_ns for f in frames if f is not None]
    assert all(b > a for a, b in itertools.pairwise(stamps))
    assert all(read_pattern(f.image)[1] == (f.stamp_ns // 1_000_000) % 2**32 for f in frames if f is not None)


def _wait(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_capture_keeps_the_newest_frame_and_counts_drops() -> None:
    source = SyntheticSource(CameraRequest(64, 16, 100.0))
    capture = CaptureThread(source, source.open())
    capture.start()
    try:
        first = capture.wait_newer(5.0)
        assert first is not None
        time.sleep(0.3)  # the consumer is slow: frames pile up, only the newest is kept
        second = capture.wait_newer(5.0)
        assert second is not None and second.seq > first.seq + 1
        stats = capture.stats()
        assert stats.dropped == second.seq - first.seq - 1 + (first.seq - 1)
        assert read_pattern(second.captured.image)[0] == second.seq - 1
        seqs = [f.seq for f in (capture.wait_newer(5.0) for _ in range(5)) if f is not None]
        assert seqs == sorted(seqs) and len(set(seqs)) == 5
    finally:
        capture.stop()


def test_capture_reconnects_when_the_device_comes_back(tmp_path: Path) -> None:
    presence = tmp_path / "video0"
    presence.write_text("present")
    source = SyntheticSource(CameraRequest(64, 16, 50.0), str(presence))
    events: list[str] = []
    capture = CaptureThread(source, source.open(), reconnect_period_s=0.1, on_event=lambda k, _: events.append(k))
    capture.start()
    try:
        assert capture.wait_newer(5.0) is not None
        presence.unlink()
        _wait(lambda: not capture.stats().connected)
        assert re.search("disappeared|unplugged", capture.stats().last_error)
        capture.wait_newer(0.3)  # drain what came before the unplug
        assert capture.wait_newer(0.5) is None
        presence.write_text("present")
        _wait(lambda: capture.stats().connected)
        assert capture.wait_newer(5.0) is not None
        assert events == ["disconnected", "reconnected"] and capture.stats().reconnects == 1
        presence.write_text("stall")
        capture.wait_newer(0.3)
        assert capture.wait_newer(0.5) is None and capture.stats().connected
        presence.write_text("present")
        assert capture.wait_newer(5.0) is not None
    finally:
        capture.stop()


def _write_video(path: Path, frames: int, width: int = 160, height: int = 120) -> None:
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 20.0, (width, height))
    for i in range(frames):
        writer.write(make_pattern(i, i, width, height)[:, :, ::-1].copy())
    writer.release()


def test_video_file_source_plays_in_order_and_loops(tmp_path: Path) -> None:
    video = tmp_path / "clip.avi"
    _write_video(video, 5)
    source = make_source(str(video), CameraRequest(fps=200.0))
    assert isinstance(source, OpenCVSource)
    mode = source.open()
    assert (mode.width, mode.height, mode.fps) == (160, 120, 200.0)
    counters = []
    for _ in range(8):
        frame = source.read(1.0)
        assert frame is not None
        counters.append(read_pattern(frame.image)[0])
    source.close()
    assert counters == [0, 1, 2, 3, 4, 0, 1, 2]
    with pytest.raises(CameraDisconnectedError):
        source.read(0.1)


def test_bad_devices_and_modes_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(CameraNotFoundError, match=r"/dev/video_missing does not exist.*cameras find"):
        make_source("/dev/video_missing", CameraRequest()).open()
    with pytest.raises(CameraNotFoundError, match="no camera device given"):
        make_source("", CameraRequest())
    video = tmp_path / "clip.avi"
    _write_video(video, 2)
    with pytest.raises(UnsupportedModeError, match=r"is 160x120, not 640x480"):
        make_source(str(video), CameraRequest(640, 480)).open()
    with pytest.raises(CameraNotFoundError, match="unplugged"):
        make_source(f"synthetic:{tmp_path / 'nothing'}", CameraRequest()).open()
    with pytest.raises(ValueError, match="fourcc must be one of MJPG, YUYV"):
        CameraRequest(fourcc="H264")
    with pytest.raises(ValueError, match="width and height must be given together"):
        CameraRequest(width=640)
