"""Leader -> follower teleoperation across processes on simulated arms (fake servo buses on pseudo-terminals)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import default_fake_calibration
from lerobot_drivers.fake.arms import fake_arm_bus
from lerobot_drivers.fake.bus import PtyServoBus
from lerobot_drivers.motors.calibration import radians_to_ticks, save_calibration, ticks_to_radians
from lerobot_ros.testing import venv_script

pytestmark = pytest.mark.ros

MAX_REL = 0.15


class Recorder:
    """Keeps follower joint_states and the commands the teleop node sends."""

    def __init__(self, node) -> None:
        from sensor_msgs.msg import JointState

        self.lock = threading.Lock()
        self.states: list = []
        self.commands: list = []
        node.create_subscription(JointState, "/follower/joint_states", lambda m: self._add(self.states, m), 50)
        node.create_subscription(JointState, "/follower/joint_commands", lambda m: self._add(self.commands, m), 50)

    def _add(self, where: list, msg) -> None:
        with self.lock:
            where.append((time.monotonic(), msg))

    def wait(self, predicate, timeout: float = 30.0):
        """The newest follower joint_states once it satisfies `predicate` ({joint: rad} -> bool)."""
        return self._wait(self.states, "follower state", predicate, timeout)

    def wait_command(self, predicate, timeout: float = 30.0):
        """The newest joint_commands this recorder received once it satisfies `predicate`.

        The follower moving proves only that the follower driver gets the commands: this recorder's own
        subscription discovers the teleop's publisher independently, sometimes seconds later, and a command
        sent before that is never delivered to it (volatile durability).
        """
        return self._wait(self.commands, "joint_commands", predicate, timeout)

    def _wait(self, where: list, what: str, predicate, timeout: float):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            with self.lock:
                last = where[-1][1] if where else None
            if last is not None and predicate(dict(zip(last.name, last.position, strict=True))):
                return last
            time.sleep(0.02)
        raise AssertionError(f"the {what} never satisfied the condition; last one {last}")


@pytest.fixture
def start_arms(tmp_path, processes):
    """Starts a fake leader and follower with their drivers; returns {role: (fake, calibration, file, driver)}."""
    rigs = []

    def start(leader_robot: str = "so101_leader") -> dict:
        out = {}
        for role, robot in (("leader", leader_robot), ("follower", "so101_follower")):
            spec = get_arm(robot)
            calibration = default_fake_calibration(spec)
            fake = fake_arm_bus(spec, calibration)
            pty = PtyServoBus(fake)
            pty.start()
            rigs.append(pty)
            cal_file = tmp_path / f"{robot}.json"
            save_calibration(cal_file, calibration)
            argv = [
                venv_script("arm_driver"), "--ros-args", "-r", f"__ns:=/{role}",
                "-p", f"robot_type:={robot}", "-p", f"port:={pty.port}", "-p", f"calibration_file:={cal_file}",
                "-p", "loop_rate:=50.0", "-p", "bus_timeout:=0.2",
            ]  # fmt: skip
            driver = processes.start(argv, name=f"driver-{role}")
            out[role] = (fake, calibration, cal_file, driver)
        return out

    yield start
    processes.stop_all()
    for pty in rigs:
        pty.stop()


@pytest.fixture
def arms(start_arms):
    return start_arms()


def teleop(processes, arms, leader_type: str = "so101_leader", max_rel: float = MAX_REL):
    argv = [
        venv_script("leader_teleop"), "--ros-args",
        "-p", f"leader_type:={leader_type}", "-p", "follower_type:=so101_follower",
        "-p", f"leader_calibration:={arms['leader'][2]}", "-p", f"follower_calibration:={arms['follower'][2]}",
        "-p", f"max_relative_target:={max_rel}",
    ]  # fmt: skip
    return processes.start(argv, name="teleop")


def move_leader(arms, joint: str, radians: float) -> None:
    fake, calibration, _, _ = arms["leader"]
    spec = get_arm("so101_leader")
    fake.servo(spec.joint(joint).motor_id).move_by_hand(radians_to_ticks(radians, calibration[joint], 4096))


def test_follower_follows_the_leader_within_tolerance_and_jumps_are_clipped(arms, processes, ros_node) -> None:
    rec = Recorder(ros_node)
    for role in ("leader", "follower"):
        arms[role][3].wait_for_output("active", timeout=60)
    node = teleop(processes, arms)
    node.wait_for_output(r"so101_leader \(/leader\) -> so101_follower \(/follower\)", timeout=60)
    move_leader(arms, "shoulder_pan", 0.1)
    move_leader(arms, "elbow_flex", -0.12)

    def at_first_move(joints: dict[str, float]) -> bool:
        return abs(joints["shoulder_pan"] - 0.1) < 0.02 and abs(joints["elbow_flex"] + 0.12) < 0.02

    rec.wait(at_first_move)
    # Record the jump only once this recorder provably receives the teleop's commands.
    rec.wait_command(at_first_move)
    # a jump of the leader: every command stays within max_relative_target of the follower's position
    with rec.lock:
        start = len(rec.commands)
    move_leader(arms, "shoulder_pan", 1.0)
    rec.wait(lambda s: abs(s["shoulder_pan"] - 1.0) < 0.03)
    # Commands arrive in order on their own topic: once the final target is here, every clipped step is too.
    rec.wait_command(lambda s: abs(s["shoulder_pan"] - 1.0) < 0.01)
    with rec.lock:
        commands = [m for _, m in rec.commands[start:]]
        states = [m for _, m in rec.states]
    pans = [c.position[0] for c in commands]
    assert any(0.2 < p < 0.9 for p in pans), "the follower was sent intermediate, clipped targets"
    steps = [b - a for a, b in itertools.pairwise(pans)]
    assert max(steps) <= 2 * MAX_REL + 0.05, "no command jumped the whole way"
    follower_pan = [s.position[0] for s in states]
    assert max(abs(b - a) for a, b in itertools.pairwise(follower_pan)) < 0.5
    fake, calibration, _, _ = arms["follower"]

    def follower_goal() -> float:
        return ticks_to_radians(fake.servo(1).get("Goal_Position"), calibration["shoulder_pan"], 4096)

    # The driver writes the newest command on its next loop cycle, after the command reached this recorder.
    deadline = time.monotonic() + 10
    while abs(follower_goal() - 1.0) > 0.01 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert follower_goal() == pytest.approx(1.0, abs=0.01)


def test_a_leader_of_another_robot_type_is_refused_and_the_follower_does_not_move(arms, processes) -> None:
    arms["follower"][3].wait_for_output("active", timeout=60)
    node = teleop(processes, arms, leader_type="koch_leader")
    node.wait_for_output(r"cannot start teleoperation: a koch_leader cannot drive a so101_follower", timeout=60)
    assert node.wait(30) == 1
    move_leader(arms, "shoulder_pan", 0.5)
    time.sleep(1.0)
    fake = arms["follower"][0]
    assert all(fake.servo(i).get("Goal_Position") == 2048 for i in range(1, 7))


def test_teleop_checks_what_the_drivers_run_and_sends_nothing_on_a_mismatch(start_arms, processes, tmp_path) -> None:
    arms = start_arms(leader_robot="koch_leader")  # the leader port has a Koch leader on it
    so101_leader_cal = tmp_path / "so101_leader.json"
    save_calibration(so101_leader_cal, default_fake_calibration(get_arm("so101_leader")))
    arms["leader"] = (*arms["leader"][:2], so101_leader_cal, arms["leader"][3])
    for role in ("leader", "follower"):
        arms[role][3].wait_for_output("active", timeout=60)
    node = teleop(processes, arms)  # configured for an so101_leader
    node.wait_for_output(r"/leader runs a koch_leader, not the so101_leader .* nothing is sent", timeout=60)
    koch = get_arm("koch_leader")
    fake, calibration = arms["leader"][0], arms["leader"][1]
    fake.servo(1).move_by_hand(
        radians_to_ticks(0.5, calibration["shoulder_pan"], koch.model("shoulder_pan").resolution)
    )
    time.sleep(1.5)
    follower = arms["follower"][0]
    assert all(follower.servo(i).get("Goal_Position") == 2048 for i in range(1, 7))
    assert node.returncode is None
