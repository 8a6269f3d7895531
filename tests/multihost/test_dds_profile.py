"""The multi-host Fast DDS profile and how it is chosen (LEROBOT_ROS_DDS, `lerobot-ros dds --profile`)."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from lerobot_ros.dds import PROFILE_ENV, DdsProfileError, profile_path, ros_environment
from lerobot_ros.testing import venv_script

NS = {"d": "http://www.eprosima.com"}


def test_multihost_profile_keeps_shared_memory_and_adds_large_udp():
    root = ET.parse(profile_path("multihost")).getroot()
    transports = {
        t.findtext("d:transport_id", namespaces=NS): t for t in root.iterfind(".//d:transport_descriptor", NS)
    }
    kinds = {t.findtext("d:type", namespaces=NS) for t in transports.values()}
    assert kinds == {"SHM", "UDPv4"}
    udp = next(t for t in transports.values() if t.findtext("d:type", namespaces=NS) == "UDPv4")
    assert int(udp.findtext("d:maxMessageSize", namespaces=NS)) == 65500
    assert int(udp.findtext("d:receiveBufferSize", namespaces=NS)) >= 4 * 1024 * 1024
    participant = root.find(".//d:participant", NS)
    assert participant is not None and participant.get("is_default_profile") == "true"
    used = [e.text for e in participant.iterfind(".//d:userTransports/d:transport_id", NS)]
    assert sorted(used) == sorted(transports)
    assert participant.findtext(".//d:useBuiltinTransports", namespaces=NS) == "false"


def test_profile_is_chosen_by_name_or_environment():
    assert profile_path("multihost").name == "fastdds_multihost.xml"
    assert profile_path("shm").name == "fastdds_shm.xml"
    env = ros_environment({"LEROBOT_ROS_DDS": "multihost"})
    assert env[PROFILE_ENV] == str(profile_path("multihost"))
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET"
    env = ros_environment({}, profile="multihost")
    assert env["LEROBOT_ROS_DDS"] == "multihost"  # children started with it choose the same profile
    assert (
        ros_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, profile="multihost")[
            "ROS_AUTOMATIC_DISCOVERY_RANGE"
        ]
        == "LOCALHOST"
    )  # a range the user set wins
    assert ros_environment({})[PROFILE_ENV] == str(profile_path("shm"))
    with pytest.raises(DdsProfileError, match="LEROBOT_ROS_DDS='udp' is not a DDS profile; use one of multihost, shm"):
        ros_environment({"LEROBOT_ROS_DDS": "udp"})


def test_cli_prints_the_multihost_environment_and_refuses_unknown_names():
    out = subprocess.run(
        [venv_script("lerobot-ros"), "dds", "env", "--profile", "multihost"], capture_output=True, text=True, check=True
    ).stdout
    assert f"export {PROFILE_ENV}={profile_path('multihost')}" in out.splitlines()
    bad = subprocess.run(
        [venv_script("lerobot-ros"), "dds", "profile"],
        capture_output=True,
        text=True,
        check=False,
        env={"LEROBOT_ROS_DDS": "tcp", "PATH": "/usr/bin:/bin"},
    )
    assert bad.returncode != 0
    assert (
        bad.stderr.strip()
        .splitlines()[-1]
        .endswith("LEROBOT_ROS_DDS='tcp' is not a DDS profile; use one of multihost, shm")
    )


def test_launch_applies_the_chosen_profile_to_its_processes(tmp_path):
    launch_file = tmp_path / "env.launch.yaml"
    launch_file.write_text(
        "launch:\n- executable: {cmd: 'printenv FASTDDS_DEFAULT_PROFILES_FILE ROS_AUTOMATIC_DISCOVERY_RANGE', "
        "output: screen}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (PROFILE_ENV, "LEROBOT_ROS_DDS")}
    env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
    argv = [venv_script("lerobot-ros"), "launch", "--dds-profile", "multihost", "--log-dir", str(tmp_path)]
    out = subprocess.run(
        [*argv, str(launch_file)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=120,
    ).stdout
    assert str(profile_path("multihost")) in out
    assert "SUBNET" in out
