"""Policy node + action executor driving the fake-hardware arm (fake servos on a pty + arm_driver), as processes.

The scripted policy (a sine per joint starting at the measured pose) runs with an injected inference delay
of 0.2x, 0.8x and 1.5x the chunk duration.
"""

from __future__ import annotations

import itertools
import math
import threading
import time

import numpy as np
import pytest
import yaml

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import default_fake_calibration
from lerobot_drivers.fake.arms import fake_arm_bus
from lerobot_drivers.fake.bus import PtyServoBus
from lerobot_drivers.motors.calibration import save_calibration
from lerobot_ros.testing import call_service, venv_script

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
HORIZON = 15
FPS = 30
CHUNK_S = HORIZON / FPS  # 0.5 s
AMPLITUDE_DEG = 8.0
FREQUENCY = 0.5
EXECUTOR_RATE = 50.0
MAX_VELOCITY = 1.5  # rad/s, 3.4x the sine's peak speed


def write_contract(path, namespace: str = "/follower") -> str:
    names = [f"{j}.pos" for j in JOINTS]
    data = {
        "robot_type": "so101_follower",
        "fps": FPS,
        "features": {
            "observation.state": {"topic": f"{namespace}/joint_states", "type": "sensor_msgs/msg/JointState",
                                  "joints": JOINTS, "names": names, "units": "rad_to_deg", "max_age_s": 1.0},
            "action": {"topic": f"{namespace}/joint_commands", "type": "sensor_msgs/msg/JointState",
                       "joints": JOINTS, "names": names, "units": "rad_to_deg"},
        },
    }  # fmt: skip
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


class Probe:
    """Keeps the driver's joint_states, the executor's commands and /diagnostics."""

    def __init__(self, node, namespace: str = "/follower") -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        self.node = node
        self.lock = threading.Lock()
        self.states: list = []
        self.commands: list = []
        self.trajectories: list = []
        self.diagnostics: list = []
        node.create_subscription(JointState, f"{namespace}/joint_states", self._keep(self.states), 100)
        node.create_subscription(JointState, f"{namespace}/joint_commands", self._keep(self.commands), 100)
        node.create_subscription(JointTrajectory, f"{namespace}/joint_trajectory", self._keep(self.trajectories), 20)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 50)

    def _keep(self, into: list):
        def on_message(msg) -> None:
            with self.lock:
                into.append((time.monotonic(), msg))

        return on_message

    def _on_diag(self, msg) -> None:
        with self.lock:
            for status in msg.status:
                if "action executor" in status.name:
                    self.diagnostics.append({kv.key: kv.value for kv in status.values})

    def wait(self, what: str, count: int, timeout: float = 90.0) -> list:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                items = list(getattr(self, what))
            if len(items) >= count:
                return items
            time.sleep(0.05)
        raise AssertionError(f"got {len(items)}/{count} {what} within {timeout} s")

    def diagnostic(self, predicate, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for values in reversed(self.diagnostics):
                    if predicate(values):
                        return values
            time.sleep(0.1)
        with self.lock:
            last = self.diagnostics[-1] if self.diagnostics else None
        raise AssertionError(f"no matching executor diagnostics within {timeout} s; last: {last}")

    def positions(self, since: float) -> np.ndarray:
        with self.lock:
            return np.array([list(m.position) for t, m in self.states if t >= since])


def start_fake_arm(processes, tmp_path, ptys: list, *, output: str = "joint_commands"):
    """Fake SO-101 servos on a pty + arm driver + action executor in /follower, not yet waited for.

    The pty is appended to `ptys` as soon as it runs, for the caller to stop after the processes.
    Returns (driver, executor).
    """
    spec = get_arm("so101_follower")
    calibration = default_fake_calibration(spec)
    pty = PtyServoBus(fake_arm_bus(spec, calibration))
    pty.start()
    ptys.append(pty)
    cal_file = tmp_path / "so101.json"
    save_calibration(cal_file, calibration)
    # The executor's joints and limits come from the driver's section of the robot configuration.
    robot = tmp_path / "robot.yaml"
    robot.write_text(yaml.safe_dump({"/follower/arm_driver": {"ros__parameters": {
        "robot_type": "so101_follower", "calibration_file": str(cal_file)}}}))  # fmt: skip
    ns = ["-r", "__ns:=/follower"]
    driver = processes.start(
        [venv_script("arm_driver"), "--ros-args", *ns, "-p", f"port:={pty.port}",
         "-p", f"calibration_file:={cal_file}", "-p", "loop_rate:=50.0", "-p", "command_timeout:=0.5",
         "-p", "bus_timeout:=0.1", "-p", "bus_retries:=4", "-p", "connect_timeout:=10.0"],
        name="driver",
    )  # fmt: skip
    executor = processes.start(
        [venv_script("action_executor"), "--ros-args", *ns, "-p", f"output:={output}",
         "-p", f"robot_config:={robot}", "-p", f"rate:={EXECUTOR_RATE}", "-p", "diagnostics_period:=0.25",
         "-p", f"max_velocity:={MAX_VELOCITY}"],
        name="executor",
    )  # fmt: skip
    return driver, executor


@pytest.fixture
def rig(tmp_path, processes):
    """Start fake arm + driver + executor + policy node; returns a function (delay_factor, **options) -> processes."""
    ptys: list = []

    def start(delay_factor: float, *, workers: int = 1, output: str = "joint_commands", policy_extra: str = ""):
        driver, executor = start_fake_arm(processes, tmp_path, ptys, output=output)
        contract = write_contract(tmp_path / "contract.yaml")
        scripted = (
            f"scripted:delay={delay_factor * CHUNK_S},horizon={HORIZON},fps={FPS},amplitude={AMPLITUDE_DEG},"
            f"frequency={FREQUENCY}{policy_extra}"
        )
        policy = processes.start(
            [venv_script("policy_node"), "--ros-args", "-p", f"checkpoint:={scripted}", "-p", f"contract:={contract}",
             "-p", f"inference_workers:={workers}", "-p", "margin:=0.1", "-p", "threshold:=0.0",
             "-p", "max_observation_age:=1.0"],
            name="policy",
        )  # fmt: skip
        for process in (driver, executor, policy):
            process.wait_for_output("active", timeout=60)
        return driver, executor, policy

    yield start
    processes.stop_all()
    for pty in ptys:
        pty.stop()


def command_steps(commands: list) -> tuple[np.ndarray, np.ndarray]:
    """Stamps (s) and the largest joint change between consecutive commands."""
    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in commands])
    positions = np.array([list(m.position) for _, m in commands])
    return stamps, np.max(np.abs(np.diff(positions, axis=0)), axis=1)


def command_speeds(commands: list) -> np.ndarray:
    """Largest joint speed between consecutive commands (rad/s, by their stamps): load delays ticks, not speeds."""
    stamps, steps = command_steps(commands)
    return steps / np.maximum(np.diff(stamps), 1e-3)


@pytest.mark.parametrize(("factor", "workers"), [(0.2, 1), pytest.param(0.8, 4, marks=pytest.mark.extended)])
def test_commands_at_the_driver_are_continuous_and_never_starve(rig, ros_node, factor, workers):
    probe = Probe(ros_node)
    rig(factor, workers=workers)
    # From 1 s after the first command: the first chunk fades in from the measured pose (a deliberate catch-up).
    start_count = len(probe.wait("commands", 1)) + int(EXECUTOR_RATE)
    probe.wait("states", 1)
    commands = probe.wait("commands", start_count + int(4 * EXECUTOR_RATE))[start_count:]
    stamps, _ = command_steps(commands)
    assert np.all(np.diff(stamps) > 0)  # stamped in order
    # The sine moves at most 2 pi f A = 0.44 rad/s. A chunk handed over by a jump would show a speed of the
    # amplitude (0.14 rad) over one tick (7 rad/s); when the machine's load delays a chunk past the end of the
    # plan, the hold and the catch-up that follow stay within max_velocity. Speeds, not steps: load delays ticks.
    speeds = command_speeds(commands)
    assert speeds.max() <= MAX_VELOCITY * 1.01, speeds.max()
    assert all(len(m.name) == 6 and all(math.isfinite(p) for p in m.position) for _, m in commands)
    values = probe.diagnostic(lambda v: int(v["chunks_accepted"]) >= 4)
    # Starvation is asserted on scripted timelines (core tests); here the machine's load may delay a chunk.
    assert int(values["chunks_accepted"]) > int(values["chunks_rejected"]), values
    # The arm follows: the driver's measured positions swing with the policy's sine.
    swing = np.ptp(probe.positions(since=commands[0][0]), axis=0)
    assert swing[0] > 0.5 * math.radians(AMPLITUDE_DEG), swing


def test_slow_inference_starves_safely_and_is_reported(rig, ros_node):
    probe = Probe(ros_node)
    rig(1.5)
    values = probe.diagnostic(lambda v: int(v.get("rejected_stale", "0")) >= 1 and int(v["starvation_events"]) >= 1)
    assert values["starved"] == "true" or float(values["starvation_s"]) > 0
    commands = probe.wait("commands", 20)
    _, steps = command_steps(commands)
    assert all(all(math.isfinite(p) for p in m.position) for _, m in commands)
    assert steps.max() < 0.01  # holding, never jumping


def test_disable_stops_motion_and_enable_resumes(rig, ros_node):
    from std_srvs.srv import SetBool

    probe = Probe(ros_node)
    rig(0.2, output="joint_trajectory")
    probe.wait("trajectories", 3)
    # The driver starts last: its joint_states may reach this probe a discovery round after the policy's.
    probe.wait("states", 1)
    reply = call_service(ros_node, SetBool, "/follower/action_executor/enable", SetBool.Request(data=False))
    assert reply.success, reply.message
    values = probe.diagnostic(lambda v: v["enabled"] == "false")
    time.sleep(0.5)  # the hold reaches the driver
    since = time.monotonic()
    time.sleep(1.5)
    stopped = probe.positions(since)
    assert len(stopped) > 10
    assert np.ptp(stopped, axis=0).max() < 2e-3  # still: the fake servos report the held goal
    assert int(values["chunks_rejected"]) >= 0
    count = len(probe.trajectories)
    reply = call_service(ros_node, SetBool, "/follower/action_executor/enable", SetBool.Request(data=True))
    assert reply.success
    probe.wait("trajectories", count + 2)
    since = time.monotonic()
    time.sleep(1.5)
    assert np.ptp(probe.positions(since), axis=0).max() > 5e-3  # moving again


def test_trajectory_output_carries_the_remaining_horizon(rig, ros_node):
    probe = Probe(ros_node)
    rig(0.2, output="joint_trajectory")
    trajectories = [m for _, m in probe.wait("trajectories", 4)]
    for msg in trajectories[1:]:
        assert list(msg.joint_names) == JOINTS
        offsets = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points]
        assert offsets[0] == 0.0 and all(b > a for a, b in itertools.pairwise(offsets))
        assert 1 < len(msg.points) <= HORIZON + 1  # steps already past at arrival were dropped
        assert offsets[-1] < CHUNK_S
