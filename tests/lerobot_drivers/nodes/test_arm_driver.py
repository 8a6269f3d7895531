"""The arm driver node as a separate process on a simulated arm (fake servos on a pseudo-terminal)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import signal
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

LOOP_RATE = 50.0


class Probe:
    """Keeps every joint_states and /diagnostics message the driver publishes."""

    def __init__(self, node, namespace: str = "") -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        self.node = node
        self.lock = threading.Lock()
        self.states: list = []
        self.diagnostics: list = []
        node.create_subscription(JointState, f"{namespace}/joint_states", self._on_state, 50)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 50)
        self.commands = node.create_publisher(JointState, f"{namespace}/joint_commands", 10)
        self.trajectories = node.create_publisher(JointTrajectory, f"{namespace}/joint_trajectory", 10)

    def _on_state(self, msg) -> None:
        with self.lock:
            self.states.append(msg)

    def _on_diag(self, msg) -> None:
        with self.lock:
            self.diagnostics.extend(msg.status)

    def wait_states(self, count: int, timeout: float = 20.0) -> list:
        deadline = time.monotonic() + timeout
        start = len(self.states)
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.states) - start >= count:
                    return self.states[start : start + count]
            time.sleep(0.02)
        raise AssertionError(f"got {len(self.states) - start}/{count} joint_states within {timeout} s")

    def wait_position(self, joint: str, predicate, timeout: float = 15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                last = self.states[-1] if self.states else None
            if last is not None and predicate(last.position[list(last.name).index(joint)]):
                return last
            time.sleep(0.02)
        raise AssertionError(f"{joint} never satisfied the condition; last state {last}")

    def wait_diagnostic(self, predicate, timeout: float = 15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for status in reversed(self.diagnostics):
                    values = {kv.key: kv.value for kv in status.values}
                    if predicate(status, values):
                        return status, values
            time.sleep(0.05)
        with self.lock:
            last = self.diagnostics[-1] if self.diagnostics else None
        raise AssertionError(f"no matching /diagnostics status within {timeout} s; last: {last}")

    def stream_until(self, names, positions, joint: str, predicate, timeout: float = 15.0):
        """Publish the command every 20 ms until `joint` satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.command(names, positions)
            with self.lock:
                last = self.states[-1] if self.states else None
            if last is not None and predicate(last.position[list(last.name).index(joint)]):
                return last
            time.sleep(0.02)
        raise AssertionError(f"{joint} never satisfied the condition; last state {last}")

    def command(self, names, positions) -> None:
        from sensor_msgs.msg import JointState

        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name, msg.position = list(names), [float(p) for p in positions]
        self.commands.publish(msg)


@pytest.fixture
def arm_rig(tmp_path, processes):
    """Start a fake arm and a driver on it; returns a function (robot, **params) -> (fake, pty, driver)."""
    rigs = []

    def start(
        robot: str = "so101_follower", *, file_changes=None, cal_subpath=None, models=None, model_numbers=None,
        remove_ids=(), extra=(), bus_timeout=0.2,
    ):  # fmt: skip
        spec = get_arm(robot)
        calibration = default_fake_calibration(spec)
        fake = fake_arm_bus(spec, calibration, models=models)
        for motor_id, number in (model_numbers or {}).items():
            fake.servo(motor_id).set("Model_Number", number)
        for motor_id in remove_ids:
            del fake.servos[motor_id]
        for joint, changes in (file_changes or {}).items():
            calibration[joint] = dataclasses.replace(calibration[joint], **changes)
        pty = PtyServoBus(fake)
        pty.start()
        rigs.append(pty)
        cal_file = tmp_path / (cal_subpath or f"{robot}.json")
        save_calibration(cal_file, calibration)
        argv = [
            venv_script("arm_driver"), "--ros-args",
            "-p", f"robot_type:={robot}", "-p", f"port:={pty.port}", "-p", f"calibration_file:={cal_file}",
            "-p", f"loop_rate:={LOOP_RATE}", "-p", "diagnostics_period:=0.2", "-p", f"bus_timeout:={bus_timeout}",
            *extra,
        ]  # fmt: skip
        driver = processes.start(argv, name=f"driver-{robot}")
        return fake, pty, driver

    yield start
    processes.stop_all()
    for pty in rigs:
        pty.stop()


def test_publishes_joint_states_and_holds_measured_pose_on_activate(arm_rig, ros_node):
    probe = Probe(ros_node)
    fake, _, driver = arm_rig()
    driver.wait_for_output("active \\(follower\\)")
    states = probe.wait_states(60)
    spec = get_arm("so101_follower")
    assert list(states[-1].name) == list(spec.joint_names)
    calibration = default_fake_calibration(spec)
    expected = [
        ticks_to_radians(fake.servo(i + 1).get("Present_Position"), calibration[n], 4096)
        for i, n in enumerate(spec.joint_names)
    ]
    assert list(states[-1].position) == pytest.approx(expected, abs=1e-12)
    assert max(abs(p) for p in expected) < 1e-3  # the fake starts mid-range
    stamps = [s.header.stamp.sec + s.header.stamp.nanosec * 1e-9 for s in states]
    assert all(b > a for a, b in itertools.pairwise(stamps))
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert LOOP_RATE * 0.5 < rate < LOOP_RATE * 1.5
    for motor_id in range(1, 7):  # torque on, goal = where it was: nothing moved
        servo = fake.servo(motor_id)
        assert servo.get("Torque_Enable") == 1
        assert servo.get("Goal_Position") == servo.get("Present_Position") == 2048


def test_follows_a_trajectory_and_clips_out_of_range_commands(arm_rig, ros_node):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    probe = Probe(ros_node)
    fake, _, driver = arm_rig()
    driver.wait_for_output("active")
    probe.wait_states(5)
    traj = JointTrajectory()
    traj.joint_names = ["shoulder_pan", "elbow_flex"]
    for t, (a, b) in ((0.5, (0.2, -0.1)), (1.0, (0.4, -0.3))):
        point = JointTrajectoryPoint(positions=[a, b], time_from_start=Duration(sec=int(t), nanosec=int((t % 1) * 1e9)))
        traj.points.append(point)
    probe.trajectories.publish(traj)
    probe.wait_position("shoulder_pan", lambda p: abs(p - 0.4) < 0.01)
    state = probe.wait_position("elbow_flex", lambda p: abs(p + 0.3) < 0.01)
    # Intermediate samples lie between start and end: the motion was interpolated, not a jump.
    pans = [s.position[0] for s in probe.states]
    assert any(0.05 < p < 0.35 for p in pans)
    assert state.position[2] == pytest.approx(-0.3, abs=0.01)

    cal = default_fake_calibration(get_arm("so101_follower"))["wrist_flex"]
    upper = ticks_to_radians(cal.range_max, cal, 4096)
    # Streamed (a single command goes stale after command_timeout; at max_velocity the move takes longer).
    probe.stream_until(["wrist_flex"], [5.0], "wrist_flex", lambda p: abs(p - upper) < 0.01)
    assert fake.servo(4).get("Goal_Position") == cal.range_max
    _, values = probe.wait_diagnostic(lambda s, v: int(v.get("clipped_cycles", "0")) > 0)
    assert int(values["clipped_cycles"]) > 0


def test_holds_on_nan_and_stale_commands(arm_rig, ros_node):
    probe = Probe(ros_node)
    fake, _, driver = arm_rig(extra=("-p", "command_timeout:=0.3"))
    driver.wait_for_output("active")
    probe.wait_states(5)
    cal = default_fake_calibration(get_arm("so101_follower"))["shoulder_lift"]
    for _ in range(10):
        probe.command(["shoulder_lift"], [0.25])
        time.sleep(0.02)
    probe.wait_position("shoulder_lift", lambda p: abs(p - 0.25) < 0.01)
    goal = fake.servo(2).get("Goal_Position")
    assert goal == radians_to_ticks(0.25, cal, 4096)
    probe.command(["shoulder_lift"], [math.nan])
    _, values = probe.wait_diagnostic(lambda s, v: int(v.get("rejected_inputs", "0")) > 0)
    assert "non-finite" in values["last_rejection"]
    _, values = probe.wait_diagnostic(lambda s, v: int(v.get("stale_holds", "0")) > 0)
    time.sleep(0.3)
    assert fake.servo(2).get("Goal_Position") == goal  # neither NaN nor staleness moved it
    assert "stale" in driver.output()


def goal_recorder(fake):
    """Every Goal_Position the fake servos receive, per motor id, in order."""
    writes: dict[int, list[int]] = {i: [] for i in fake.servos}
    address = fake.servo(1).model.register("Goal_Position").address

    def on_write(motor_id, written_address, data):
        if written_address == address:
            writes[motor_id].append(fake.servo(motor_id).get("Goal_Position"))

    fake.on_write = on_write
    return writes


def test_a_far_trajectory_and_a_silent_bus_never_step_a_goal_above_max_velocity(arm_rig, ros_node):
    # Issue 18: a 1e6 target stepped Goal_Position 1.77 rad (3.34 rad on wrist_roll) in one cycle, and after
    # a silent bus the goal caught up by 0.31 rad in one cycle. Default max_velocity: 3 rad/s.
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    probe = Probe(ros_node)
    fake, _, driver = arm_rig(bus_timeout=0.02)
    writes = goal_recorder(fake)
    driver.wait_for_output("active")
    probe.wait_states(5)
    limit_ticks = math.ceil(3.0 / LOOP_RATE / (2 * math.pi / 4095)) + 1
    traj = JointTrajectory()
    traj.joint_names = list(get_arm("so101_follower").joint_names)
    traj.points.append(
        JointTrajectoryPoint(positions=[1e6, -1e6, 1e6, -1e6, 1e6, 1e6], time_from_start=Duration(sec=1))
    )
    probe.trajectories.publish(traj)
    probe.wait_position("wrist_roll", lambda p: p > 1.0)
    with fake.lock:
        fake.faults.silent = True  # a few failed cycles (0.06 s each), fewer than bus_lost_after_failures
    while fake.counters.silenced < 6 * 3 * 4:
        time.sleep(0.01)
    with fake.lock:
        fake.faults.silent = False
    probe.wait_position("wrist_roll", lambda p: p > 3.0)
    _, values = probe.wait_diagnostic(lambda s, v: int(v.get("failed_cycles", "0")) >= 3)
    assert int(values["step_limited_cycles"]) > 0
    for motor_id, goals in writes.items():
        steps = [abs(b - a) for a, b in itertools.pairwise(goals)]
        assert len(goals) > 20 and max(steps) <= limit_ticks, (motor_id, max(steps), limit_ticks)
    assert max(abs(b - a) for a, b in itertools.pairwise(writes[5])) >= limit_ticks - 2  # it did move at the limit
    assert "Traceback" not in driver.output()


@pytest.mark.parametrize("fault", ["drop", "corrupt", "error_bits"])
def test_survives_injected_faults_without_a_jump(arm_rig, ros_node, fault):
    probe = Probe(ros_node)
    fake, _, driver = arm_rig(bus_timeout=0.05)  # lost replies cost a timeout each
    driver.wait_for_output("active")
    probe.wait_states(10)
    before = len(probe.states)
    with fake.lock:
        if fault == "drop":
            fake.faults.drop_rate = 0.15
        elif fault == "corrupt":
            fake.faults.corrupt_rate = 0.15
    if fault == "error_bits":
        fake.set_error(3, 0x04)
    probe.wait_states(40)
    if fault == "error_bits":
        status, values = probe.wait_diagnostic(lambda s, v: "overheat" in s.message)
        assert status.level == b"\x01"
        assert values["elbow_flex.error"] == "overheat"
    else:
        status, values = probe.wait_diagnostic(lambda s, v: int(v.get("bus_retries", "0")) > 0 and s.level != b"\x00")
        assert "bus retries" in status.message or "bus failing, holding" in status.message
        assert fake.counters.dropped + fake.counters.corrupted > 0
    with fake.lock:
        fake.faults.drop_rate = fake.faults.corrupt_rate = 0.0
    probe.wait_states(10)
    positions = [s.position for s in probe.states[before:]]
    jumps = [max(abs(a - b) for a, b in zip(p, q, strict=True)) for p, q in itertools.pairwise(positions)]
    assert max(jumps) < 1e-6  # the arm was holding still throughout
    assert all(fake.servo(i).get("Goal_Position") == 2048 for i in range(1, 7))


def test_disconnect_reports_error(arm_rig, ros_node):
    probe = Probe(ros_node)
    _, pty, driver = arm_rig()
    driver.wait_for_output("active")
    probe.wait_states(5)
    pty.disconnect()
    # ERROR with the reason, and the node is no longer active (issue 18: it stayed active after an unplug).
    probe.wait_diagnostic(
        lambda s, v: (
            s.level == b"\x02"
            and "bus lost: port disconnected" in s.message
            and v.get("lifecycle_state") == "unconfigured"
        )
    )
    driver.wait_for_output("configure and activate again once the bus is back")
    assert "Traceback" not in driver.output()


@pytest.mark.parametrize("torque_off", [True, False])
def test_torque_on_shutdown_follows_the_parameter(arm_rig, ros_node, torque_off):
    fake, _, driver = arm_rig(extra=("-p", f"torque_off_on_shutdown:={'true' if torque_off else 'false'}"))
    driver.wait_for_output("active")
    assert all(fake.servo(i).get("Torque_Enable") == 1 for i in range(1, 7))
    driver.send_signal(signal.SIGINT)
    assert driver.wait(10) == 0
    expected = 0 if torque_off else 1
    assert all(fake.servo(i).get("Torque_Enable") == expected for i in range(1, 7))


def test_koch_leader_publishes_hand_motion_with_only_the_gripper_torqued(arm_rig, ros_node):
    probe = Probe(ros_node)
    fake, _, driver = arm_rig("koch_leader")
    driver.wait_for_output("active \\(leader\\)")
    probe.wait_states(5)
    torque = {i: fake.servo(i).get("Torque_Enable") for i in range(1, 7)}
    assert torque == {1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 1}
    cal = default_fake_calibration(get_arm("koch_leader"))["wrist_flex"]
    with fake.lock:
        fake.servo(4).move_by_hand(2048 + 300)
    probe.wait_position("wrist_flex", lambda p: p == pytest.approx(ticks_to_radians(2348, cal, 4096)))


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"model_numbers": {5: 2825}}, "'wrist_roll' at id 5 reports model number 2825 .* expected 777 .sts3215."),
        ({"models": {"elbow_flex": "xl330-m077"}, "robot": "koch_follower"}, "reports model number 1190"),
        ({"remove_ids": (6,)}, "'gripper' .id 6, sts3215. does not answer"),
        pytest.param(  # the bus-level test of the same refusal: test_buses_on_fake.py
            {"extra": ("-p", "baudrate:=500000")},
            "at 500000 baud, but motors answer at 1000000 baud",
            marks=pytest.mark.extended,
        ),
        ({"file_changes": {"elbow_flex": {"range_max": 5000}}}, "elbow_flex: range 1024..5000, expected"),
        ({"cal_subpath": "calibration/robots/koch_follower/arm.json"}, "calibration of a koch_follower"),
        ({"extra": ("-p", "port:=/dev/ttyNOPE")}, "cannot open /dev/ttyNOPE"),
    ],
)
def test_bad_input_fails_configure_and_nothing_moves(arm_rig, ros_node, setup, message):
    probe = Probe(ros_node)
    robot = setup.pop("robot", "so101_follower")
    fake, _, driver = arm_rig(robot, **setup)
    driver.wait_for_output(message)
    driver.wait_for_output("configure failed")
    status, _ = probe.wait_diagnostic(lambda s, v: s.level == b"\x02")
    assert status.message
    for servo in fake.servos.values():
        assert servo.get("Torque_Enable") == 0
        assert servo.get("Goal_Position") == servo.get("Present_Position")
