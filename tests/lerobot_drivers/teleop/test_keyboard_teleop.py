"""Keyboard teleop: jog keys and the recorder's episode keys, pure and through a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import threading
import time

import numpy as np
import pytest

from lerobot_drivers.teleop.jog import JogAction, JogKeys, JointJog
from lerobot_ros.terminal_keys import Control
from lerobot_ros.testing import venv_script

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def test_jog_keys_skip_escape_sequences_and_share_the_keyboard_with_the_recorder() -> None:
    keys = JogKeys()
    controls, actions = keys.feed(b"1w\x1b[C[s\x1b[Dn")
    assert controls == [Control.NEXT, Control.RERECORD, Control.NEXT]
    assert actions == [JogAction("select", 0), JogAction("move", 1), JogAction("scale", 0.5), JogAction("move", -1)]
    assert keys.feed(b"\x1b") == ([], [])
    assert keys.flush() == [Control.STOP]


def test_joint_jog_starts_at_the_measured_pose_and_respects_limits() -> None:
    jog = JointJog(JOINTS, 0.1, [-1.0] * 6, [1.0] * 6)
    assert "waiting" in jog.apply(JogAction("move", 1)) and jog.targets is None
    jog.measure([0.0, 0.5, 0.0, 0.0, 0.0, 0.95])
    jog.apply(JogAction("select", 5))
    jog.apply(JogAction("move", 1))
    jog.apply(JogAction("move", 1))
    assert jog.targets is not None and jog.targets[5] == 1.0  # clipped at the limit
    jog.apply(JogAction("select", 1))
    jog.apply(JogAction("scale", 0.5))
    jog.apply(JogAction("move", -1))
    np.testing.assert_allclose(jog.targets, [0.0, 0.45, 0.0, 0.0, 0.0, 1.0])
    jog.measure([0.2] * 6)
    jog.apply(JogAction("resync"))
    np.testing.assert_allclose(jog.targets, [0.2] * 6)
    assert "no joint 9" in jog.apply(JogAction("select", 8))
    with pytest.raises(ValueError, match="step must be > 0"):
        JointJog(JOINTS, 0.0, [-1.0] * 6, [1.0] * 6)


@pytest.mark.ros
def test_keyboard_teleop_node_jogs_the_arm_and_calls_the_recorder(processes, ros_node) -> None:
    from sensor_msgs.msg import JointState
    from std_srvs.srv import Trigger

    calls: list[str] = []
    for name in ("next_episode", "rerecord_episode", "stop_recording"):

        def handler(request, response, name=name):
            calls.append(name)
            response.success, response.message = True, name
            return response

        ros_node.create_service(Trigger, f"/recorder/{name}", handler)
    commands: list = []
    lock = threading.Lock()

    def on_command(msg) -> None:
        with lock:
            commands.append(list(msg.position))

    ros_node.create_subscription(JointState, "/follower/joint_commands", on_command, 10)
    states = ros_node.create_publisher(JointState, "/follower/joint_states", 10)
    master, slave = pty.openpty()
    node = processes.start(
        [venv_script("keyboard_teleop"), "--ros-args", "-p", f"tty:={os.ttyname(slave)}", "-p", "step:=0.1"],
        name="keyboard",
    )
    node.wait_for_output("keys: 1-6", timeout=30)

    def wait_command(predicate, timeout: float = 30.0) -> list[float]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states.publish(JointState(name=JOINTS, position=[0.0, 0.2, 0.0, 0.0, 0.0, 0.0]))
            with lock:
                last = commands[-1] if commands else None
            if last is not None and predicate(last):
                return last
            time.sleep(0.05)
        raise AssertionError(f"no matching joint_commands; last {last}")

    wait_command(lambda c: c == pytest.approx([0.0, 0.2, 0.0, 0.0, 0.0, 0.0]))
    os.write(master, b"1ww2s")
    wait_command(lambda c: c == pytest.approx([0.2, 0.1, 0.0, 0.0, 0.0, 0.0]))
    os.write(master, b"\x1b[C")  # right arrow: save the episode; its '[' is not the halve-step key
    node.wait_for_output("next: next_episode", timeout=30)
    os.write(master, b"s")
    wait_command(lambda c: c == pytest.approx([0.2, 0.0, 0.0, 0.0, 0.0, 0.0]))
    os.write(master, b"q")
    node.wait_for_output("stop: stop_recording", timeout=30)
    assert calls == ["next_episode", "stop_recording"]
    os.close(master)
    os.close(slave)
