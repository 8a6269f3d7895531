"""`lerobot-ros launch` bringing up real nodes: the graph it produces, respawn of a killed node, shutdown."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from launch_helpers import alive, start_launcher, started_pids
from std_msgs.msg import String

from lerobot_ros.testing import ProcessGroup, wait_for_messages, wait_for_node, wait_for_topic

pytestmark = pytest.mark.ros

CHILD_LAUNCH = """
launch:
  - arg: {name: robot, description: name of the arm's node}
  - node:
      pkg: lerobot_ros
      exec: demo_talker
      name: $(var robot)
      namespace: arm
      output: screen
      param: [{from: $(dirname)/talker_b.yaml}]
      remap: [{from: chatter, to: /global_chatter}]
"""

MAIN_LAUNCH = """
launch:
  - arg: {name: ns, default: robots}
  - group:
      - push-ros-namespace: {namespace: $(var ns)}
      - node:
          pkg: lerobot_ros
          exec: demo_talker
          name: talker_a
          namespace: left
          output: screen
          param:
            - {name: message, value: inline $(var ns)}
            - {name: rate_hz, value: 10.0}
          remap: [{from: chatter, to: left_chatter}]
  - group:
      - push-ros-namespace: {namespace: $(var ns)}
      - include:
          file: $(dirname)/child.launch.yaml
          arg: [{name: robot, value: talker_b}]
"""


def test_namespaces_remaps_params_and_include_produce_the_expected_graph(
    processes: ProcessGroup, ros_node, tmp_path: Path
) -> None:
    (tmp_path / "talker_b.yaml").write_text("/**:\n  ros__parameters:\n    message: from file\n    rate_hz: 10.0\n")
    (tmp_path / "child.launch.yaml").write_text(CHILD_LAUNCH)
    (tmp_path / "main.launch.yaml").write_text(MAIN_LAUNCH)
    launcher = start_launcher(processes, tmp_path / "main.launch.yaml", tmp_path, "ns:=fleet")

    wait_for_node(ros_node, "/fleet/left/talker_a", timeout=30)
    wait_for_node(ros_node, "/fleet/arm/talker_b", timeout=30)
    nodes = set(ros_node.get_node_names_and_namespaces())
    assert {("talker_a", "/fleet/left"), ("talker_b", "/fleet/arm")} <= nodes

    assert wait_for_topic(ros_node, "/fleet/left/left_chatter", timeout=30) == ["std_msgs/msg/String"]
    assert wait_for_topic(ros_node, "/global_chatter", timeout=30) == ["std_msgs/msg/String"]
    topics = {name for name, _ in ros_node.get_topic_names_and_types()}
    assert "/fleet/left/chatter" not in topics
    assert "/fleet/arm/chatter" not in topics

    (left,) = wait_for_messages(ros_node, String, "/fleet/left/left_chatter", timeout=30)
    assert re.fullmatch(r"inline fleet \d+", left.data)
    (right,) = wait_for_messages(ros_node, String, "/global_chatter", timeout=30)
    assert re.fullmatch(r"from file \d+", right.data)
    launcher.wait_for_output(
        r"^\[demo_talker-1\] .*\[fleet\.left\.talker_a\]: publishing on /fleet/left/left_chatter at 10\.0 Hz"
    )

    pids = [pid for label_pids in started_pids(launcher).values() for pid in label_pids]
    assert len(pids) == 2
    launcher.send_signal(signal.SIGINT)
    assert launcher.wait(timeout=30) == 0
    assert [pid for pid in pids if alive(pid)] == []
    assert "did not stop after SIGINT" not in launcher.output()


def test_killed_node_is_respawned(processes: ProcessGroup, ros_node, tmp_path: Path) -> None:
    (tmp_path / "phoenix.launch.yaml").write_text(
        """
launch:
  - node:
      pkg: lerobot_ros
      exec: demo_talker
      name: phoenix
      param: [{name: message, value: alive}, {name: rate_hz, value: 10.0}]
      respawn: "true"
      respawn_delay: 0.5
"""
    )
    launcher = start_launcher(processes, tmp_path / "phoenix.launch.yaml", tmp_path)
    wait_for_messages(ros_node, String, "/chatter", timeout=30)
    (first_pid,) = started_pids(launcher)["demo_talker-1"]

    os.kill(first_pid, signal.SIGKILL)
    launcher.wait_for_output(r"\[ERROR\] \[demo_talker-1\]: process has died \[pid \d+, exit code -9")
    launcher.wait_for_output(r"\[INFO\] \[demo_talker-1\]: respawning in 0\.5 s")
    deadline = time.monotonic() + 10
    while len(started_pids(launcher)["demo_talker-1"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = started_pids(launcher)["demo_talker-1"]
    assert len(pids) == 2 and pids[1] != first_pid
    messages = wait_for_messages(ros_node, String, "/chatter", count=2, timeout=30)
    assert all(m.data.startswith("alive ") for m in messages)
    wait_for_node(ros_node, "/phoenix", timeout=10)
