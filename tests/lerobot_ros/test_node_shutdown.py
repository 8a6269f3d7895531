"""Every node kind stops cleanly on SIGINT and SIGTERM (`lerobot_ros.node_main`), as real processes.

One graph holds one running instance of each node kind, each doing its work when the signal comes (the
executor ticking chunks out, an inference running, the recorder in a session, the sim bridge rendering two
cameras). Each gets its signal and must exit 0, within a generous bound, with no traceback, no RCLError and
no "never awaited" warning in its output; the recorder's dataset must be valid afterwards. A second SIGINT
during shutdown exits at once, and a start-up error is one line and status 1.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import default_fake_calibration
from lerobot_drivers.motors.calibration import save_calibration
from lerobot_ros.testing import ManagedProcess, ProcessGroup, venv_script, wait_for_messages

pytestmark = pytest.mark.ros

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL_CONTRACT = REPO_ROOT / "tests" / "lerobot_recorder" / "recorder" / "small_contract.yaml"
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
# What a normal stop must never print.
FORBIDDEN = ("Traceback", "RCLError", "never awaited", "context is invalid")
# A bound on a clean stop on a loaded machine, not a speed target.
EXIT_TIMEOUT_S = 40.0
READY_TIMEOUT_S = 90.0
CHAIN = ("arm_driver", "policy", "action_executor")  # the nodes behind /arm/joint_commands
# Gives record_keyboard a terminal on stdin (the harness starts processes with stdin on /dev/null).
TTY_SHIM = (
    "import os, pty, sys\n"
    "master, slave = pty.openpty()\n"
    "os.set_inheritable(master, True)\n"
    "os.dup2(slave, 0)\n"
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@dataclass
class Case:
    """One node under test: the signal it gets and the exit status it must end with."""

    process: ManagedProcess
    sig: signal.Signals
    code: int = 0
    extra: list[str] = field(default_factory=list)  # output lines it must print


def ros_args(**params: object) -> list[str]:
    out = ["--ros-args"]
    for key, value in params.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if key == "ns":
            out += ["-r", f"__ns:={text}"]
        elif key == "node":
            out += ["-r", f"__node:={text}"]
        else:
            out += ["-p", f"{key}:={text}"]
    return out


def write_arm_contract(path: Path, namespace: str) -> Path:
    names = [f"{j}.pos" for j in JOINTS]
    contract = {
        "robot_type": "so101_follower",
        "fps": 30,
        "features": {
            "observation.state": {"topic": f"{namespace}/joint_states", "type": "sensor_msgs/msg/JointState",
                                  "joints": JOINTS, "names": names, "units": "rad_to_deg", "max_age_s": 1.0},
            "action": {"topic": f"{namespace}/joint_commands", "type": "sensor_msgs/msg/JointState",
                       "joints": JOINTS, "names": names, "units": "rad_to_deg"},
        },
    }  # fmt: skip
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


class Diagnostics:
    """Keeps the newest /diagnostics values per status name."""

    def __init__(self, node) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self._lock = threading.Lock()
        self._values: dict[str, dict[str, str]] = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on, 50)

    def _on(self, msg) -> None:
        with self._lock:
            for status in msg.status:
                self._values[status.name] = {kv.key: kv.value for kv in status.values}

    def wait_for(self, name: str, predicate: Callable[[dict[str, str]], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                values = self._values.get(name)
            if values is not None and predicate(values):
                return
            time.sleep(0.1)
        raise AssertionError(f"diagnostics {name!r} never matched within {timeout} s; last: {values}")


def wait_for_status(node, topic: str, predicate, timeout: float):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from lerobot_msgs.msg import RecorderStatus

    found: list = []
    done = threading.Event()

    def on_status(msg) -> None:
        if predicate(msg):
            found.append(msg)
            done.set()

    qos = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
    subscription = node.create_subscription(RecorderStatus, topic, on_status, qos)
    try:
        assert done.wait(timeout), f"no matching status on {topic} within {timeout} s"
    finally:
        node.destroy_subscription(subscription)
    return found[0]


def check_exit(case: Case, deadline: float) -> str:
    """'' when `case` exited as it must; else what went wrong, with its output."""
    name = case.process.name
    try:
        code = case.process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return f"{name}: still running {EXIT_TIMEOUT_S} s after {case.sig.name}\n{case.process.output()[-3000:]}"
    output = case.process.output()
    problems = [f"exit status {code}, expected {case.code}"] if code != case.code else []
    problems += [f"printed {word!r}" for word in FORBIDDEN if word in output]
    problems += [f"did not print {line!r}" for line in case.extra if line not in output]
    return f"{name} ({case.sig.name}): {'; '.join(problems)}\n{output[-3000:]}" if problems else ""


@pytest.fixture
def fake_arm(tmp_path, processes):
    """The follower's fake servo bus in a process of its own, as `fake_hardware:=true` runs it (stopped after the
    nodes: the group stops its newest processes first). Served by a thread of this test process, it answered the
    driver's set-up pings late while this process started the sixteen nodes under load (4 busy loops on 2 cores):
    the driver's configure failed with "motor 'shoulder_pan' (id 1) does not answer; other ids answering: 1". It
    failed so once more with the fake in its own process: the whole host delivered the pty's bytes late while the
    nodes started, and the set-up now tells late replies from silence (lerobot_drivers README, "Late, not silent")."""
    cal_file = tmp_path / "so101_follower.json"
    bus = processes.start(
        [venv_script("fake_servo_bus"), "--robot", "so101_follower", "--calibration-out", str(cal_file)],
        name="fake_servo_bus",
    )
    port = bus.wait_for_output(r"bus for so101_follower on (\S+)", timeout=READY_TIMEOUT_S).group(1)
    yield port, cal_file


def write_recorder_contract(path: Path) -> Path:
    """The recorder tests' small contract on topics of its own (/cameras/front is the sim bridge's)."""
    contract = yaml.safe_load(SMALL_CONTRACT.read_text())
    for feature in contract["features"].values():
        feature["topic"] = "/rec/" + feature["topic"].strip("/").replace("/", "_")
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def start_nodes(processes: ProcessGroup, tmp_path: Path, port: str, cal_file: Path, tty: str) -> dict[str, Case]:
    """Every node kind, all at once (namespaces keep them apart); returns name -> Case."""
    contract = write_arm_contract(tmp_path / "arm_contract.yaml", "/arm")
    recorder_contract = write_recorder_contract(tmp_path / "recorder_contract.yaml")
    leader_cal = tmp_path / "so101_leader.json"
    save_calibration(leader_cal, default_fake_calibration(get_arm("so101_leader")))
    sim_env = {**processes.env, "MUJOCO_GL": "egl"}
    cases: dict[str, Case] = {}

    def start(name: str, sig: signal.Signals, script: str, *args: str, env: dict[str, str] | None = None) -> None:
        argv = [venv_script(script), *args]
        if name == "record_keyboard":
            argv = [sys.executable, "-c", TTY_SHIM, *argv]
        cases[name] = Case(processes.start(argv, name=name, env=env), sig)

    start(
        "arm_driver",
        signal.SIGINT,
        "arm_driver",
        *ros_args(ns="/arm", port=port, calibration_file=cal_file, loop_rate=50.0),
    )
    executor_limits = {
        "joint_names": "[shoulder_pan,shoulder_lift,elbow_flex,wrist_flex,wrist_roll,gripper]",
        "joint_limits_lower": "[-3.0,-3.0,-3.0,-3.0,-3.0,-3.0]",
        "joint_limits_upper": "[3.0,3.0,3.0,3.0,3.0,3.0]",
        "max_velocity": 3.0,
    }
    start(
        "action_executor",
        signal.SIGINT,
        "action_executor",
        *ros_args(ns="/arm", output="joint_commands", **executor_limits),
    )
    start(
        "policy",
        signal.SIGTERM,
        "policy_node",
        *ros_args(checkpoint="scripted:horizon=15,fps=30", contract=contract, max_observation_age=1.0),
    )
    # An inference that outlasts the stop: the node leaves it behind instead of waiting for it.
    start(
        "policy_busy",
        signal.SIGINT,
        "policy_node",
        *ros_args(
            node="policy_busy",
            checkpoint="scripted:delay=60",
            contract=contract,
            chunk_topic="/busy/action_chunk",
            max_observation_age=1.0,
        ),
    )
    start(
        "camera",
        signal.SIGINT,
        "camera",
        *ros_args(ns="/shutdown_cam", device="synthetic", width=160, height=120, fps=15.0),
    )
    start(
        "camera_group",
        signal.SIGTERM,
        "camera_group",
        *ros_args(names="[grp]", synthetic=True, **{"grp.width": 160, "grp.height": 120, "grp.fps": 15.0}),
    )
    start("synthetic_streams", signal.SIGINT, "synthetic_streams", *ros_args(contract=recorder_contract))
    start(
        "recorder",
        signal.SIGINT,
        "recorder",
        *ros_args(
            contract=recorder_contract,
            root=tmp_path / "dataset",
            task="pick the cube",
            video_codec="h264",
            episode_time_s=1.0,
            reset_time_s=0.2,
            num_episodes=100,
            min_free_mb=0.0,
            startup_timeout_s=60.0,
        ),
    )
    start("demo_talker", signal.SIGTERM, "demo_talker", *ros_args(rate_hz=5.0))
    start("keyboard_teleop", signal.SIGINT, "keyboard_teleop", *ros_args(tty=tty, follower_namespace="/kb"))
    start("record_keyboard", signal.SIGINT, "record_keyboard", *ros_args(recorder="/none"))
    start("gamepad_teleop", signal.SIGINT, "gamepad_teleop", *ros_args(follower_namespace="/gp"))
    start(
        "leader_teleop",
        signal.SIGINT,
        "leader_teleop",
        *ros_args(
            leader_calibration=leader_cal,
            follower_calibration=cal_file,
            leader_namespace="/lt_leader",
            follower_namespace="/lt_follower",
            driver_name="''",
        ),
    )
    # Two 320x240 cameras: the case that once ignored SIGTERM for more than 20 s.
    start(
        "sim_bridge",
        signal.SIGTERM,
        "sim_bridge",
        *ros_args(ns="/sim", cameras="front:320x240,wrist:320x240"),
        env=sim_env,
    )
    start("scripted_expert", signal.SIGINT, "scripted_expert", *ros_args(ns="/sim"), env=sim_env)
    return cases  # fmt: skip


def wait_until_working(cases: dict[str, Case], ros_node) -> None:
    """Each node is doing its work: publishing, ticking, inferring, recording, rendering."""
    from sensor_msgs.msg import Image, JointState

    diagnostics = Diagnostics(ros_node)
    # The executor ticks chunks of the policy out to the driver.
    wait_for_messages(ros_node, JointState, "/arm/joint_commands", count=3, timeout=READY_TIMEOUT_S)
    # policy_busy's first inference (60 s) is running.
    diagnostics.wait_for(
        "/policy_busy: policy", lambda v: v.get("inferences_in_flight") == "1", timeout=READY_TIMEOUT_S
    )
    # The recorder has saved an episode and goes on recording.
    wait_for_status(ros_node, "/recorder/status", lambda m: m.num_episodes >= 1, timeout=READY_TIMEOUT_S)
    for topic in ("/shutdown_cam/image_raw", "/cameras/grp/image_raw", "/cameras/front/image_raw"):
        wait_for_messages(ros_node, Image, topic, timeout=READY_TIMEOUT_S)
    patterns = {
        "demo_talker": "publishing on",
        "keyboard_teleop": "keys: 1-6",
        "record_keyboard": "keys:",
        "gamepad_teleop": "waiting for a gamepad",
        "leader_teleop": r"so101_leader \(/lt_leader\) -> so101_follower",
        "scripted_expert": r"episode 0 started",
    }
    for name, pattern in patterns.items():
        cases[name].process.wait_for_output(pattern, timeout=READY_TIMEOUT_S)


def test_every_node_kind_exits_cleanly_on_sigint_or_sigterm(processes, ros_node, tmp_path, fake_arm) -> None:
    port, cal_file = fake_arm
    master, slave = pty.openpty()
    try:
        cases = start_nodes(processes, tmp_path, port, cal_file, os.ttyname(slave))
        try:
            wait_until_working(cases, ros_node)
        except AssertionError as err:
            # Seen twice under load (0/3 joint_commands in 90 s, passing alone in 32 s at load 12): say which link
            # of driver -> policy -> executor was missing, with their own words.
            tails = [f"--- {name}:\n{cases[name].process.output()[-1500:]}" for name in CHAIN]
            raise AssertionError(f"{err}\n" + "\n".join(tails)) from None
        saved = DatasetReader(tmp_path / "dataset").num_episodes
        cases["policy_busy"].extra.append("was left behind")
        for case in cases.values():
            case.process.send_signal(case.sig)
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        failures = [problem for case in cases.values() if (problem := check_exit(case, deadline))]
    finally:
        processes.stop_all()  # before the terminal goes away under keyboard_teleop
        os.close(master)
        os.close(slave)
    assert not failures, "\n\n".join(failures)
    # Saved episodes are intact; the one being recorded was discarded.
    assert validate(tmp_path / "dataset") == []
    assert DatasetReader(tmp_path / "dataset").num_episodes >= saved >= 1


def test_a_second_sigint_exits_at_once_and_a_start_up_error_is_one_line(processes, ros_node, tmp_path, fake_arm):
    port, cal_file = fake_arm
    contract = write_arm_contract(tmp_path / "arm_contract.yaml", "/arm")
    driver = processes.start(
        [venv_script("arm_driver"), *ros_args(ns="/arm", port=port, calibration_file=cal_file)], name="arm_driver"
    )
    # Its stop waits a while for the running inference: the second SIGINT comes during that wait.
    policy = processes.start(
        [venv_script("policy_node"),
         *ros_args(checkpoint="scripted:delay=60", contract=contract, max_observation_age=1.0)],
        name="policy",
    )  # fmt: skip
    broken = processes.start(
        [venv_script("synthetic_streams"), *ros_args(contract=tmp_path / "missing.yaml")], name="broken"
    )
    Diagnostics(ros_node).wait_for(
        "/policy: policy", lambda v: v.get("inferences_in_flight") == "1", timeout=READY_TIMEOUT_S
    )
    policy.send_signal(signal.SIGINT)
    policy.wait_for_output("SIGINT: shutting down", timeout=EXIT_TIMEOUT_S)
    policy.send_signal(signal.SIGINT)
    assert policy.wait(EXIT_TIMEOUT_S) == 128 + signal.SIGINT
    assert "second SIGINT: exiting now" in policy.output()

    assert broken.wait(EXIT_TIMEOUT_S) == 1
    output = broken.output()
    assert "cannot start synthetic_streams: " in output and "missing.yaml" in output, output
    assert "Traceback" not in output, output
    driver.send_signal(signal.SIGINT)
    assert driver.wait(EXIT_TIMEOUT_S) == 0
