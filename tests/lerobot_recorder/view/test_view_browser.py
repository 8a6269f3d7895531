"""The web viewer that `lerobot-ros dataset view --web` and `lerobot-ros view --web` serve, opened in headless
Chromium (opt-in: `make test-browser`): a screenshot must show the camera picture and the joint plots.

Rerun draws the whole viewer into one WebGL canvas (no DOM text), so the screenshot is checked by colour: the
camera's magenta marker, the state series' blue and the action series' orange (the colours the view gives
them). Which entities exist, and their values, is checked exactly from the .rrd the same code path writes
(test_dataset_view.py, test_view_live.py). With LEROBOT_ROS_UPDATE_DOCS=1 the screenshots are copied into docs/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from browser import HeadlessPage, free_port, pixels_near, served_output
from PIL import Image

from lerobot_dataset import DatasetWriter, FeatureSpec
from lerobot_recorder.view.entities import ACTION_COLOR, STATE_COLOR
from lerobot_ros.testing import venv_script

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "recorder"))
DOCS = HERE.parents[2] / "docs"
MAGENTA = (255, 0, 255)
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]

pytestmark = pytest.mark.browser  # opt-in; without Debian's chromium they skip (conftest.py)


def scene(step: int, height: int = 240, width: int = 320) -> np.ndarray:
    """A dark floor with a magenta block that moves left to right."""
    y = np.arange(height)[:, None]
    frame = np.zeros((height, width, 3), np.uint8)
    frame[..., 1] = 40 + (y * 60 // height).astype(np.uint8)
    frame[..., 2] = 30
    left = 20 + 4 * step
    frame[100:160, left : left + 60] = MAGENTA
    return frame


def episode_dataset(root: Path, frames: int = 50) -> None:
    names = [f"{j}.pos" for j in JOINTS]
    features = {
        "observation.state": FeatureSpec("float32", (6,), names),
        "action": FeatureSpec("float32", (6,), names),
        "observation.images.front": FeatureSpec("video", (240, 320, 3)),
    }
    writer = DatasetWriter.create(root, repo_id="local/view", fps=30, features=features, video_codec="h264")
    writer.start_episode("pick up the cube and place it in the bin")
    for step in range(frames):
        t = step / 30
        state = np.array([40 * np.sin(2 * t + j) for j in range(6)], np.float32)
        action = np.array([40 * np.sin(2 * (t + 0.15) + j) for j in range(6)], np.float32)
        writer.add_frame({"observation.state": state, "action": action, "observation.images.front": scene(step)})
    writer.save_episode()
    writer.close()


def wait_for_picture(page: HeadlessPage, timeout: float = 180.0) -> np.ndarray:
    """Screenshots until the camera picture and both series are drawn (the viewer loads for tens of seconds)."""
    deadline = time.monotonic() + timeout
    shot = page.screenshot()
    while time.monotonic() < deadline:
        if (
            pixels_near(shot, MAGENTA, 30) > 500
            and pixels_near(shot, STATE_COLOR, 12) > 200
            and pixels_near(shot, ACTION_COLOR, 12) > 200
        ):
            return shot
        time.sleep(2.0)
        shot = page.screenshot()
    return shot


def test_dataset_view_in_the_web_viewer(tmp_path):
    root = tmp_path / "ds"
    episode_dataset(root)
    port, grpc_port = free_port(), free_port()
    server = subprocess.Popen(
        [
            venv_script("lerobot-ros"),
            "dataset",
            "view",
            str(root),
            "--web",
            "--port",
            str(port),
            "--grpc-port",
            str(grpc_port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    page = None
    try:
        output = served_output(server)
        assert "web viewer at http://" in output, output
        url = f"http://127.0.0.1:{port}/?url=rerun%2Bhttp%3A%2F%2F127.0.0.1%3A{grpc_port}%2Fproxy"
        page = HeadlessPage(url, tmp_path / "chromium.log")
        shot = wait_for_picture(page)
    finally:
        if page is not None:
            page.close()
        server.terminate()
        server.wait(timeout=30)
    Image.fromarray(shot).save(tmp_path / "dataset_view.png")
    assert pixels_near(shot, MAGENTA, 30) > 500, f"no camera picture in the screenshot {tmp_path / 'dataset_view.png'}"
    assert pixels_near(shot, STATE_COLOR, 12) > 200, "no state series drawn"
    assert pixels_near(shot, ACTION_COLOR, 12) > 200, "no action series drawn"
    if os.environ.get("LEROBOT_ROS_UPDATE_DOCS") == "1":
        shutil.copy(tmp_path / "dataset_view.png", DOCS / "view_dataset.png")


def test_dataset_view_beyond_loopback_through_the_token_proxy(tmp_path):
    """`--web --host <LAN address>` in a network namespace: the browser opens the printed URL with the token; the
    page and its data requests pass the token proxy (the cookie the token set), and the picture and plots show."""
    sys.path.insert(0, str(HERE.parents[1] / "multihost"))
    from harness import lan_namespace, unavailable

    if unavailable() is not None:
        pytest.skip(str(unavailable()))
    root = tmp_path / "ds"
    episode_dataset(root)
    with lan_namespace(tmp_path) as lan:
        server = subprocess.Popen(
            lan.command([venv_script("lerobot-ros"), "dataset", "view", str(root), "--web", "--host", lan.ipv4]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            output = served_output(server)
            lines = output.splitlines()
            url = next((line.split()[3] for line in lines if line.startswith("web viewer at http://")), None)
            assert url is not None and "?token=" in url, output
            shot_file = tmp_path / "beyond_loopback.png"
            browse = subprocess.run(
                ["ip", "netns", "exec", lan.ns, sys.executable, str(HERE / "browse_screenshot.py"), url,
                 str(shot_file)], capture_output=True, text=True, timeout=400, check=False,
            )  # fmt: skip
            assert browse.returncode == 0, browse.stderr[-3000:]
        finally:
            server.terminate()
            server.wait(timeout=30)
    shot = np.asarray(Image.open(shot_file).convert("RGB"))
    assert pixels_near(shot, MAGENTA, 30) > 500, f"no camera picture in the screenshot {shot_file}"
    assert pixels_near(shot, STATE_COLOR, 12) > 200, "no state series drawn"
    assert pixels_near(shot, ACTION_COLOR, 12) > 200, "no action series drawn"


def camera_block_pixels(shot: np.ndarray) -> int:
    """Pixels of synthetic_streams' `scene` block, (200, 60..178, 40) with noise: a camera picture is shown."""
    r, g, b = (shot[..., i].astype(int) for i in range(3))
    return int(((abs(r - 200) <= 12) & (abs(b - 40) <= 12) & (g >= 50) & (g <= 190)).sum())


@pytest.mark.ros
def test_live_view_in_the_web_viewer(tmp_path, processes, ros_node):
    """`lerobot-ros view --web` on a real DDS graph: synthetic robot (scene pictures), a fake policy whose chunks
    start at the measured joint positions, a recorder status; the screenshot must show the cameras, the state,
    action and chunk series."""
    import threading

    from builtin_interfaces.msg import Duration
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from recorder_helpers import ros_args
    from sensor_msgs.msg import JointState
    from test_view_live import JOINTS as LIVE_JOINTS
    from test_view_live import contracts

    from lerobot_msgs.msg import ActionChunk, RecorderStatus
    from lerobot_recorder.view.entities import CHUNK_COLOR

    published, _ = contracts(tmp_path)
    processes.start(
        # Lighter than a robot (joints 30 Hz, cameras 10 Hz): a software-rendered browser on 2 busy cores falls
        # minutes behind a full-rate stream, and the screenshot would show its first second only.
        [
            venv_script("synthetic_streams"),
            *ros_args(
                {"contract": str(published), "picture_style": "scene", "joint_rate_hz": 30.0, "camera_rate_hz": 10.0}
            ),
        ],
        name="streams",
    )
    port, grpc_port = free_port(), free_port()
    view = processes.start(
        [
            venv_script("lerobot-ros"),
            "view",
            str(published),
            "--web",
            "--port",
            str(port),
            "--grpc-port",
            str(grpc_port),
            "--image-rate",
            "2",
        ],
        name="view",
    )
    view.wait_for_output(r"watching 4 contract topics", timeout=60)
    latest: dict[str, list[float]] = {}
    ros_node.create_subscription(JointState, "/follower/joint_states", lambda m: latest.update(q=list(m.position)), 10)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    status_pub = ros_node.create_publisher(RecorderStatus, "/recorder/status", latched)
    chunk_pub = ros_node.create_publisher(ActionChunk, "/policy/action_chunk", 5)
    diag_pub = ros_node.create_publisher(DiagnosticArray, "/diagnostics", 10)
    stop = threading.Event()

    def policy() -> None:
        k = 0
        while not stop.wait(0.3):
            k += 1
            now = ros_node.get_clock().now().to_msg()
            status = RecorderStatus(state_name="recording" if k % 40 < 30 else "saving", episode_index=k // 40)
            status.header.stamp = now
            status_pub.publish(status)
            q = latest.get("q")
            if q is None or len(q) != len(LIVE_JOINTS):
                continue
            steps = np.arange(30)[:, None]
            data = np.asarray(q)[None, :] + 0.004 * steps * np.cos(0.7 * k + np.arange(len(q)))[None, :]
            chunk = ActionChunk(names=LIVE_JOINTS, horizon=30, chunk_id=k, period=Duration(sec=0, nanosec=33_333_333))
            chunk.header.stamp = now
            chunk.data = data.astype(np.float32).reshape(-1).tolist()
            chunk_pub.publish(chunk)
            diag = DiagnosticArray(
                status=[
                    DiagnosticStatus(
                        level=DiagnosticStatus.OK,
                        name="/action_executor: action executor",
                        message="executing",
                        values=[KeyValue(key="starvation_s", value="0.000"), KeyValue(key="latency_ms", value="12.5")],
                    )
                ]
            )
            diag.header.stamp = now
            diag_pub.publish(diag)

    publisher = threading.Thread(target=policy, daemon=True)
    publisher.start()
    page = None
    try:
        url = f"http://127.0.0.1:{port}/?url=rerun%2Bhttp%3A%2F%2F127.0.0.1%3A{grpc_port}%2Fproxy"
        page = HeadlessPage(url, tmp_path / "chromium.log")
        deadline = time.monotonic() + 150
        shot = page.screenshot()
        while time.monotonic() < deadline and not (
            camera_block_pixels(shot) > 300
            and pixels_near(shot, STATE_COLOR, 12) > 200
            and pixels_near(shot, ACTION_COLOR, 12) > 200
            and pixels_near(shot, CHUNK_COLOR, 12) > 100
        ):
            time.sleep(2.0)
            shot = page.screenshot()
        time.sleep(3.0)  # a few more seconds of plot for the picture
        shot = page.screenshot()
    finally:
        stop.set()
        publisher.join(timeout=5)
        if page is not None:
            page.close()
    Image.fromarray(shot).save(tmp_path / "live_view.png")
    assert camera_block_pixels(shot) > 300, f"no camera picture in {tmp_path / 'live_view.png'}"
    assert pixels_near(shot, STATE_COLOR, 12) > 200, "no state series drawn"
    assert pixels_near(shot, ACTION_COLOR, 12) > 200, "no action series drawn"
    assert pixels_near(shot, CHUNK_COLOR, 12) > 100, "no chunk series drawn"
    if os.environ.get("LEROBOT_ROS_UPDATE_DOCS") == "1":
        shutil.copy(tmp_path / "live_view.png", DOCS / "view_live.png")
