"""DDS profile lookup, the ROS environment, and stale shared-memory cleanup."""

from __future__ import annotations

import fcntl
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from lerobot_ros.dds import PROFILE_ENV, clean_stale_shm, profile_path, ros_environment


def test_profile_is_shared_memory_plus_udp_without_builtins():
    ns = {"d": "http://www.eprosima.com"}
    root = ET.parse(profile_path()).getroot()
    kinds = {t.findtext("d:type", namespaces=ns) for t in root.iterfind(".//d:transport_descriptor", ns)}
    assert kinds == {"SHM", "UDPv4"}
    segment = root.findtext(".//d:transport_descriptor[d:type='SHM']/d:segment_size", namespaces=ns)
    assert int(segment) == 16 * 1024 * 1024
    participant = root.find(".//d:participant", ns)
    assert participant is not None and participant.get("is_default_profile") == "true"
    assert participant.findtext(".//d:useBuiltinTransports", namespaces=ns) == "false"


def test_ros_environment_applies_profile_and_keeps_user_choices():
    env = ros_environment({"PATH": "/bin"})
    assert env[PROFILE_ENV] == str(profile_path())
    assert env["RMW_IMPLEMENTATION"] == "rmw_fastrtps_cpp"
    assert sys.prefix in env["AMENT_PREFIX_PATH"].split(":")
    user = ros_environment({PROFILE_ENV: "/etc/my.xml", "RMW_IMPLEMENTATION": "rmw_x", "AMENT_PREFIX_PATH": "/opt/ros"})
    assert user[PROFILE_ENV] == "/etc/my.xml"
    assert user["RMW_IMPLEMENTATION"] == "rmw_x"
    assert user["AMENT_PREFIX_PATH"].split(":")[0] == "/opt/ros"
    assert PROFILE_ENV not in ros_environment({"FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"})


def test_single_host_profile_keeps_udp_on_loopback_and_multihost_does_not():
    ns = {"d": "http://www.eprosima.com"}
    udp = ".//d:transport_descriptor[d:type='UDPv4']"
    single = ET.parse(profile_path("shm")).getroot()
    assert [a.text for a in single.iterfind(f"{udp}/d:interfaceWhiteList/d:address", ns)] == ["127.0.0.1"]
    multihost = ET.parse(profile_path("multihost")).getroot()
    assert multihost.find(f"{udp}/d:interfaceWhiteList", ns) is None  # other hosts must reach it


def test_localhost_discovery_needs_no_second_transport_under_the_loopback_profile():
    """rmw_fastrtps adds its own UDPv4 transport (every interface) for LOCALHOST; the shm profile confines
    discovery already, so LOCALHOST is passed on as SYSTEM_DEFAULT there and nowhere else."""
    localhost = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    assert ros_environment(localhost)["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    assert ros_environment(ros_environment(localhost))["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE" not in ros_environment({})
    assert ros_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET"
    for other in (
        {PROFILE_ENV: "/etc/my.xml"},
        {"FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"},
        {"LEROBOT_ROS_DDS": "multihost"},
    ):
        assert ros_environment({**localhost, **other})["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST", other


def test_missing_override_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("LEROBOT_ROS_DDS_PROFILE", "/nonexistent/profile.xml")
    with pytest.raises(RuntimeError, match="does not exist"):
        profile_path()


def test_clean_removes_only_segments_whose_owner_is_gone(tmp_path):
    for name in [
        "fastdds_port7411",
        "fastdds_port7411_el",
        "sem.fastdds_port7411_mutex",
        "fastdds_0123456789abcdef",
        "fastdds_0123456789abcdef_el",
        "fastdds_port7413",
        "fastdds_port7413_el",
        "unrelated_file",
    ]:
        (tmp_path / name).write_bytes(b"x")
    with open(tmp_path / "fastdds_port7413_el", "ab") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a live owner
        report = clean_stale_shm(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fastdds_port7413", "fastdds_port7413_el", "unrelated_file"]
    assert report.in_use == 1
    assert set(report.removed) == {
        "fastdds_port7411",
        "fastdds_port7411_el",
        "sem.fastdds_port7411_mutex",
        "fastdds_0123456789abcdef",
        "fastdds_0123456789abcdef_el",
    }


PUBLISH_FRAMES = """
import time, numpy as np, rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
rclpy.init()
node = rclpy.create_node("frame_publisher")
qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
pub = node.create_publisher(Image, "/cameras/front/image_raw", qos)
while pub.get_subscription_count() == 0:
    time.sleep(0.05)
time.sleep(0.5)
img = Image(height=480, width=640, encoding="rgb8", step=640 * 3)
pixels = np.zeros((480, 640, 3), np.uint8)
for i in range(FRAMES):
    pixels[:] = i % 256
    img.data = pixels.tobytes()
    img.header.frame_id = str(i)
    pub.publish(img)
    time.sleep(1 / 30)
print("published", FRAMES, flush=True)
time.sleep(600)
"""
FRAMES = 90


@pytest.mark.ros
def test_full_frames_cross_processes_best_effort(processes, ros_node):
    """640x480 rgb8 best-effort frames at 30 Hz arrive whole through the shared-memory profile.

    With Fast DDS's builtin transports most of these frames are lost on small machines
    (FASTDDS_BUILTIN_TRANSPORTS=DEFAULT makes this test fail); the profile must deliver nearly all.
    """
    received: list[Image] = []
    qos = QoSProfile(depth=FRAMES, reliability=ReliabilityPolicy.BEST_EFFORT)
    ros_node.create_subscription(Image, "/cameras/front/image_raw", received.append, qos)
    publisher = processes.start([sys.executable, "-c", PUBLISH_FRAMES.replace("FRAMES", str(FRAMES))], name="frames")
    publisher.wait_for_output("published", timeout=60)
    time.sleep(1.0)  # let the last frames drain
    frames = list(received)
    assert len(frames) >= 0.9 * FRAMES, f"only {len(frames)}/{FRAMES} frames delivered"
    for frame in frames:
        pixels = np.frombuffer(bytes(frame.data), np.uint8)
        assert pixels.size == 480 * 640 * 3
        assert np.all(pixels == int(frame.header.frame_id) % 256)
