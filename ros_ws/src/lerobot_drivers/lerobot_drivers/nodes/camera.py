"""Lifecycle node publishing one camera (OpenCV device, video file or the synthetic counter pattern).

configure: open the device and apply width/height/fps/fourcc/exposure (a missing device or a mode it does
not support fails here, naming what it does support). activate: start the capture thread (newest-frame
semantics) and the publisher thread, which publishes `image_raw` (rgb8, stamp = capture time), optionally
`image_raw/compressed` (JPEG) and `camera_info`. A device that disappears is reopened every
`reconnect_period` s; a camera that delivers nothing for `stall_timeout` s is reported. /diagnostics
carries the measured fps, dropped frames, reconnects and the last error.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

from rclpy._rclpy_pybind11 import RCLError
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import Header

from lerobot_drivers.cameras.capture import CaptureThread, Frame
from lerobot_drivers.cameras.errors import CameraError
from lerobot_drivers.cameras.sources import CameraMode, CameraRequest, make_source
from lerobot_ros.images import compressed_format, encode_jpeg, message_data, rgb_to_image
from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, Level, diagnostic_status
from lerobot_ros.node_kit.lifecycle import configure_transition
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_lifecycle_node
from lerobot_ros.worker_guard import WorkerGuard

IMAGE_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)


@dataclass(frozen=True)
class CameraParameters:
    """The camera node's parameters (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    device: str = param("", "index (0), path (/dev/video0, a video file) or synthetic[:presence file]")
    width: int = param(0, "frame width; 0 = the device's default")
    height: int = param(0, "frame height; 0 = the device's default")
    fps: float = param(0.0, "frame rate; 0 = the device's default")
    fourcc: str = param("", "pixel format: MJPG, YUYV or empty for the default")
    exposure: float = param(-1.0, "manual exposure (device units); < 0 = automatic")
    frame_id: str = param("", "header.frame_id; default <node name>_optical_frame")
    publish_raw: bool = param(True, "publish image_raw (rgb8)")
    publish_compressed: bool = param(False, "publish image_raw/compressed (JPEG)")
    jpeg_quality: int = param(90, "JPEG quality of image_raw/compressed", low=1, high=100, step=1, read_only=False)
    reconnect_period: float = param(1.0, "seconds between attempts to reopen a vanished device")
    stall_timeout: float = param(2.0, "seconds without a frame before the camera is reported stalled")
    diagnostics_period: float = param(1.0, "seconds between /diagnostics reports")
    autostart: bool = param(True, "configure and activate at start-up")


class CameraNode(LifecycleNode):
    """See the module docstring."""

    def __init__(self, node_name: str = "camera", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.params = declare_parameters(self, CameraParameters)
        self._source: Any = None
        self._mode: CameraMode | None = None
        self._capture: CaptureThread | None = None
        self._publisher_thread: threading.Thread | None = None
        # An unexpected exception in the publish loop: logged, ERROR on /diagnostics, lifecycle error path.
        self._guard = WorkerGuard.for_node(self, hardware_id="camera")
        self._stop = threading.Event()
        self._pubs: dict[str, Any] = {}
        self._stalled = False
        self._published = 0
        self._last_seq = 0
        self._diag_timer: Any = None
        self._source_closed = False
        self._diagnostics = DiagnosticsPublisher(self)

    @property
    def _config(self) -> CameraParameters:
        return self.params.config

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = configure_transition(self, self._open_source, expected=(CameraError, ValueError))
        if result != TransitionCallbackReturn.SUCCESS:
            return result
        source = self._source
        if self._config.publish_raw:
            self._pubs["raw"] = self.create_publisher(Image, "image_raw", IMAGE_QOS)
        if self._config.publish_compressed:
            self._pubs["compressed"] = self.create_publisher(CompressedImage, "image_raw/compressed", IMAGE_QOS)
        self._pubs["info"] = self.create_publisher(CameraInfo, "camera_info", IMAGE_QOS)
        self.get_logger().info(f"opened {source.description}: {self._mode}")
        return TransitionCallbackReturn.SUCCESS

    def _open_source(self) -> None:
        config = self._config
        request = CameraRequest(config.width, config.height, config.fps, config.fourcc.upper(), config.exposure)
        source = make_source(config.device, request)
        self._mode = source.open()
        self._source = source
        self._source_closed = False

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self._source is not None and self._mode is not None
        if self._source_closed:
            try:
                self._mode = self._source.open()
            except CameraError as err:
                self.get_logger().error(f"activate failed: {err}")
                return TransitionCallbackReturn.FAILURE
            self._source_closed = False
        self._capture = CaptureThread(
            self._source, self._mode, float(self._config.reconnect_period), on_event=self._on_capture_event
        )
        self._stop.clear()
        self._capture.start()
        self._publisher_thread = threading.Thread(
            target=self._guard.wrap("publish loop", self._publish_loop), name="camera_publish", daemon=True
        )
        self._publisher_thread.start()
        self._diag_timer = self.create_timer(float(self._config.diagnostics_period), self._publish_diagnostics)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_threads()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def _stop_threads(self) -> None:
        self._stop.set()
        if self._capture is not None:
            self._capture.stop()
            # the capture thread closed the source: reopen on the next activate
            self._capture = None
            self._source_closed = True
        if self._publisher_thread is not None:
            self._publisher_thread.join(2.0)
            self._publisher_thread = None
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
            self._diag_timer = None

    def release(self) -> None:
        """Stop the threads, close the device, drop the publishers (idempotent)."""
        self._stop_threads()
        if self._source is not None:
            self._source.close()
            self._source = None
        for pub in self._pubs.values():
            self.destroy_publisher(pub)
        self._pubs = {}

    def _on_capture_event(self, kind: str, text: str) -> None:
        if kind == "disconnected":
            self.get_logger().warning(f"camera lost: {text}; reopening every {self._config.reconnect_period} s")
        else:
            self.get_logger().info(f"camera back: {text}")

    def _publish_loop(self) -> None:
        stall_timeout = float(self._config.stall_timeout)
        frame_id = str(self._config.frame_id) or f"{self.get_name()}_optical_frame"
        while not self._stop.is_set():
            capture = self._capture
            if capture is None:
                return
            frame = capture.wait_newer(stall_timeout)
            if frame is None:
                if not self._stop.is_set() and not self._stalled:
                    self._stalled = True
                    stats = capture.stats()
                    why = "disconnected" if not stats.connected else "connected but delivering no frames"
                    self.get_logger().error(f"camera stalled: no frame for {stall_timeout} s ({why})")
                continue
            if self._stalled:
                self._stalled = False
                self.get_logger().info("camera delivers frames again")
            try:
                self._publish(frame, frame_id)
            except RCLError:
                if self.context.ok() and not self._stop.is_set():
                    raise
                return  # shutting down (the node is being destroyed, or rclpy was shut down by other code)

    def _publish(self, frame: Frame, frame_id: str) -> None:
        header = Header(frame_id=frame_id)
        header.stamp.sec, header.stamp.nanosec = divmod(frame.captured.stamp_ns, 1_000_000_000)
        image = frame.captured.image
        raw = self._pubs.get("raw")
        if raw is not None:
            msg = rgb_to_image(image, "rgb8").fill(Image(header=header))
            raw.publish(msg)
        compressed = self._pubs.get("compressed")
        if compressed is not None:
            data = encode_jpeg(image, int(self._config.jpeg_quality))
            msg = CompressedImage(header=header, format=compressed_format("rgb8"))
            msg.data = message_data(msg, data)
            compressed.publish(msg)
        height, width = int(image.shape[0]), int(image.shape[1])
        self._pubs["info"].publish(CameraInfo(header=header, height=height, width=width))
        self._published += 1
        self._last_seq = frame.seq

    def _publish_diagnostics(self) -> None:
        capture = self._capture
        if capture is None:
            return
        stats = capture.stats()
        if self._stalled or not stats.connected:
            level = Level.ERROR
            message = "disconnected, reconnecting" if not stats.connected else "stalled: no frames"
        elif self._mode is not None and stats.fps < 0.8 * self._mode.fps and stats.captured > 2 * self._mode.fps:
            level, message = Level.WARN, f"slow: {stats.fps:.1f} fps of {self._mode.fps:g}"
        else:
            level, message = Level.OK, "ok"
        values = {
            "mode": str(self._mode),
            "fps": f"{stats.fps:.2f}",
            "frames_captured": str(stats.captured),
            "frames_published": str(self._published),
            "frames_dropped": str(stats.dropped),
            "reconnects": str(stats.reconnects),
            "connected": str(stats.connected).lower(),
            "last_frame_age_s": f"{stats.last_frame_age_s:.3f}",
            "last_error": stats.last_error,
        }
        name = f"{self.get_fully_qualified_name()}: camera"
        self._diagnostics.publish(diagnostic_status(name, level, message, values, hardware_id=self._config.device))


def main(args: list[str] | None = None) -> int:
    return run_lifecycle_node(CameraNode, "camera", CameraNode.release, args=args)


if __name__ == "__main__":
    sys.exit(main())
