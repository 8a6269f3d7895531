"""`lerobot-ros topic ...` run as a subprocess against a live graph in the test's own domain."""

from __future__ import annotations

import re

import pytest
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from lerobot_msgs.msg import RecorderStatus
from lerobot_ros.testing import venv_script, wait_for_messages, wait_for_topic


@pytest.mark.ros
def test_list_shows_topics_with_types_and_hides_hidden_ones(talker, cli, ros_node):
    ros_node.create_publisher(String, "/x/_internal", 10)
    ros_node.create_publisher(String, "/x/visible", 10)
    wait_for_topic(ros_node, "/x/_internal")

    expected = ["/x/chatter [std_msgs/msg/String]", "/x/visible [std_msgs/msg/String]"]
    shown = cli.run_until(lambda out: all(e in out for e in expected), "topic", "list", "-t")
    lines = shown.stdout.splitlines()
    assert shown.returncode == 0, shown.stderr
    assert "/x/chatter [std_msgs/msg/String]" in lines
    assert "/x/visible [std_msgs/msg/String]" in lines
    assert not any("_internal" in line for line in lines)


@pytest.mark.ros
def test_type_and_info_describe_the_topic(talker, cli):
    typed = cli.run("topic", "type", talker)
    assert typed.stdout == "std_msgs/msg/String\n", typed.stderr
    info = cli.run("topic", "info", talker, "-v")
    assert info.returncode == 0, info.stderr
    assert info.stdout.startswith("Type: std_msgs/msg/String\n\nPublisher count: 1\n\n")
    assert "Node name: demo_talker\nNode namespace: /x\nTopic type: std_msgs/msg/String\n" in info.stdout
    assert "Endpoint type: PUBLISHER" in info.stdout
    assert "Subscription count: 0\n" in info.stdout


@pytest.mark.ros
def test_echo_once_detects_the_type_and_prints_yaml(talker, cli):
    result = cli.run("topic", "echo", talker, "--once")
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"data: hello \d+\n---\n", result.stdout), result.stdout

    csv = cli.run("topic", "echo", talker, "std_msgs/String", "-n", "2", "--field", "data", "--csv")
    assert csv.returncode == 0, csv.stderr
    assert re.fullmatch(r"hello \d+\nhello \d+\n", csv.stdout), csv.stdout


@pytest.mark.ros
def test_echo_receives_a_latched_message_published_before_it_started(cli, ros_node):
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
    publisher = ros_node.create_publisher(RecorderStatus, "/recorder/status", latched)
    publisher.publish(RecorderStatus(state=RecorderStatus.STATE_RECORDING, state_name="recording", frames=7))

    result = cli.run("topic", "echo", "/recorder/status", "--once", "--no-str")
    assert result.returncode == 0, result.stderr
    assert "state: 1\nstate_name: '<string length: 9>'\n" in result.stdout
    assert "frames: 7\n" in result.stdout


@pytest.mark.ros
def test_echo_of_a_missing_topic_times_out_with_a_clear_error(cli):
    result = cli.run("topic", "echo", "/x/missing", "--timeout", "1")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "lerobot-ros topic: error: topic '/x/missing' not found within 1 s; check the name with "
        "`lerobot-ros topic list`, start its publisher, or raise --timeout"
    )


@pytest.mark.ros
def test_hz_reports_the_publishing_rate(talker, cli):
    result = cli.run("topic", "hz", talker, "-n", "2")
    assert result.returncode == 0, result.stderr
    reports = re.findall(
        r"average rate: (\d+\.\d{3})\n\tmin: \d+\.\d{3}s max: \d+\.\d{3}s std dev: \d+\.\d{5}s window: (\d+)\n",
        result.stdout,
    )
    assert len(reports) == 2, result.stdout
    rate, window = reports[-1]
    assert 10.0 < float(rate) < 30.0  # configured 20 Hz; a correctness band, not a timing threshold
    assert int(window) > int(reports[0][1])


@pytest.mark.ros
def test_pub_times_delivers_that_many_messages(processes, ros_node):
    command = ["topic", "pub", "/x/cmd", "std_msgs/msg/String", "{data: hi}", "-t", "3", "-r", "10"]
    publisher = processes.start([venv_script("lerobot-ros"), *command], name="pub")
    received = wait_for_messages(ros_node, String, "/x/cmd", count=3)
    assert [m.data for m in received] == ["hi", "hi", "hi"]
    assert publisher.wait(timeout=20) == 0
    assert publisher.output().count("publishing #") == 3


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("{positon: [1.0]}", "unknown field 'positon' in sensor_msgs/msg/JointState; fields are: header, name,"),
        ("{position: [", "malformed YAML at line 1"),
        ("{position: [a]}", "invalid value for field 'position[0]' of sensor_msgs/msg/JointState: expected a number"),
    ],
)
def test_pub_rejects_bad_values_before_touching_the_graph(values, message, offline_cli):
    result = offline_cli.run("topic", "pub", "/j", "sensor_msgs/JointState", values, "-1")
    assert result.returncode == 2
    assert result.stderr.startswith(f"lerobot-ros topic: error: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_pub_rejects_unknown_types(offline_cli):
    result = offline_cli.run("topic", "pub", "/j", "sensor_msgs/JointStat", "{}", "-1")
    assert result.returncode == 2
    assert "did you mean sensor_msgs/msg/JointState?" in result.stderr
