"""The bridge and the scripted expert as real processes in their own ROS domain."""

from __future__ import annotations

import math
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseArray
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from lerobot_drivers.arms.spec import JOINT_NAMES as DRIVER_JOINTS
from lerobot_drivers.nodes import arm_driver
from lerobot_msgs.srv import ResetEnv
from lerobot_ros.testing import call_service, venv_script, wait_for_messages, wait_for_topic
from lerobot_sim_bridge import topics

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
NS = "/follower"
FPS = 30.0
RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


def start_bridge(processes, env, name="bridge", wait=True, **params):
    argv = [venv_script("sim_bridge"), "--ros-args", "-r", f"__ns:={NS}"]
    params.setdefault("cameras", "''")
    for key, value in params.items():
        argv += ["-p", f"{key}:={value}"]
    process = processes.start(argv, name=name, env=env)
    if wait:
        process.wait_for_output("sim bridge ready", timeout=60)
    return process


class Recorder:
    """Keeps every message of a topic (with a deep reliable queue)."""

    def __init__(self, node, msg_type, topic):
        self.messages = []
        self._lock = threading.Lock()
        self._sub = node.create_subscription(msg_type, topic, self._on, RELIABLE)

    def _on(self, msg):
        with self._lock:
            self.messages.append(msg)

    def snapshot(self):
        with self._lock:
            return list(self.messages)

    def wait_until(self, condition, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self.snapshot()):
                return self.snapshot()
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; got {len(self.snapshot())} messages")


def stamp_s(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def test_topics_match_the_real_arm_driver_and_the_contract(processes, sim_env, ros_node):
    # Paced at 30 Hz (so the probe misses nothing) but stamped with simulated time (exact periods).
    start_bridge(processes, sim_env, mode="realtime", stamp_clock="sim", cameras="front:64x48", seed=0)
    expected = {f"{NS}/{t.name}" if not t.name.startswith("/") else t.name: t.type for t in topics.ARM_TOPICS}
    expected.update({t.name: t.type for t in topics.camera_topics("front")})
    for name, type_name in expected.items():
        assert wait_for_topic(ros_node, name, timeout=20) == [type_name]

    # Same names, types and QoS as the hardware driver (its source declares them as literals).
    driver_source = Path(arm_driver.__file__).read_text()
    assert re.search(rf'create_publisher\(JointState, "{topics.JOINT_STATES}", JOINT_STATE_QOS\)', driver_source)
    assert re.search(rf'JointState, "{topics.JOINT_COMMANDS}", self._on_joint_commands, COMMAND_QOS', driver_source)
    assert re.search(
        rf'JointTrajectory, "{topics.JOINT_TRAJECTORY}", self._on_joint_trajectory, COMMAND_QOS', driver_source
    )
    publishers = ros_node.get_publishers_info_by_topic(f"{NS}/{topics.JOINT_STATES}")
    assert publishers and publishers[0].qos_profile.reliability == arm_driver.JOINT_STATE_QOS.reliability
    subscribers = ros_node.get_subscriptions_info_by_topic(f"{NS}/{topics.JOINT_COMMANDS}")
    assert subscribers and subscribers[0].qos_profile.reliability == arm_driver.COMMAND_QOS.reliability

    # The SO-101 contract reads exactly these topics and joints.
    contract = yaml.safe_load((REPO / "config/contracts/so101.yaml").read_text())["features"]
    assert contract["observation.state"]["topic"] == f"{NS}/{topics.JOINT_STATES}"
    assert contract["action"]["topic"] == f"{NS}/{topics.JOINT_COMMANDS}"
    assert contract["observation.images.front"]["topic"] == topics.image_topic("front")

    states = wait_for_messages(ros_node, JointState, f"{NS}/{topics.JOINT_STATES}", count=10, qos=RELIABLE)
    for msg in states:
        assert tuple(msg.name) == DRIVER_JOINTS == tuple(contract["observation.state"]["joints"])
        assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 6
        assert all(abs(q) < math.pi for q in msg.position)  # radians
    # Rate: one joint_states per control period of simulated time.
    stamps = [stamp_s(m) for m in states]
    np.testing.assert_allclose(np.diff(stamps), 1.0 / FPS, atol=1e-6)

    image = wait_for_messages(ros_node, Image, topics.image_topic("front"), qos=RELIABLE)[0]
    assert (image.encoding, image.height, image.width, image.step, len(image.data)) == (
        "rgb8",
        48,
        64,
        192,
        48 * 64 * 3,
    )
    info = wait_for_messages(ros_node, CameraInfo, topics.camera_info_topic("front"), qos=RELIABLE)[0]
    assert (info.width, info.height) == (64, 48) and info.k[2] == 32.0 and info.header.frame_id == image.header.frame_id


def command_until_reached(ros_node, publisher, target, states, tolerance, timeout=30.0):
    command = JointState(name=list(DRIVER_JOINTS), position=[float(x) for x in target])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        publisher.publish(command)
        latest = states.snapshot()
        if latest and np.max(np.abs(np.array(latest[-1].position) - target)) < tolerance:
            return np.array(latest[-1].position)
        time.sleep(0.1)
    last = states.snapshot()[-1].position if states.snapshot() else None
    raise AssertionError(f"joints did not reach {target} within {timeout} s; last {last}")


def test_joint_commands_move_the_joints_to_the_target(processes, sim_env, ros_node):
    start_bridge(processes, sim_env, mode="realtime", seed=0)
    states = Recorder(ros_node, JointState, f"{NS}/{topics.JOINT_STATES}")
    publisher = ros_node.create_publisher(JointState, f"{NS}/{topics.JOINT_COMMANDS}", RELIABLE)
    target = np.array([0.5, -0.4, 0.6, 0.5, 0.8, 1.2])
    reached = command_until_reached(ros_node, publisher, target, states, tolerance=0.06)
    np.testing.assert_allclose(reached, target, atol=0.06)


def test_joint_trajectory_is_followed(processes, sim_env, ros_node):
    start_bridge(processes, sim_env, mode="realtime", seed=0)
    states = Recorder(ros_node, JointState, f"{NS}/{topics.JOINT_STATES}")
    states.wait_until(lambda m: len(m) > 3, 20, "joint_states")
    publisher = ros_node.create_publisher(JointTrajectory, f"{NS}/{topics.JOINT_TRAJECTORY}", RELIABLE)
    via = np.array([0.6, 0.0, 0.0, 0.0, 0.0, 0.2])
    end = np.array([-0.6, -0.3, 0.4, 0.3, 0.0, 0.2])
    trajectory = JointTrajectory(joint_names=list(DRIVER_JOINTS))  # stamp 0: start now
    trajectory.points = [
        JointTrajectoryPoint(positions=via.tolist(), time_from_start=Duration(sec=1)),
        JointTrajectoryPoint(positions=end.tolist(), time_from_start=Duration(sec=2)),
    ]
    while ros_node.count_subscribers(f"{NS}/{topics.JOINT_TRAJECTORY}") == 0:
        time.sleep(0.05)
    sent = len(states.snapshot())
    publisher.publish(trajectory)
    recorded = states.wait_until(
        lambda m: len(m) > sent and np.max(np.abs(np.array(m[-1].position) - end)) < 0.06, 20, "the trajectory end"
    )[sent:]
    positions = np.array([m.position for m in recorded])
    # It passed the via point on the way (tracking lags a little behind the linear interpolation) ...
    assert np.min(np.max(np.abs(positions - via), axis=1)) < 0.12
    # ... and the pan joint went out to +0.6 before coming back to -0.6, not straight to the end.
    assert positions[:, 0].max() > 0.45 and positions[-1, 0] < -0.5


def first_observation(ros_node, states, poses, stamp):
    def find(messages):
        return next((m for m in messages if stamp_s(m) == stamp), None)

    state = find(states.wait_until(lambda m: find(m) is not None, 20, f"joint_states stamped {stamp}"))
    pose = find(poses.wait_until(lambda m: find(m) is not None, 20, f"object poses stamped {stamp}"))
    return np.array(state.position), [(p.position.x, p.position.y, p.position.z) for p in pose.poses]


def test_reset_is_deterministic_for_a_seed(processes, sim_env, ros_node):
    # Lockstep without a controller: after each reset the bridge holds (and re-sends) the first observation.
    start_bridge(processes, sim_env, mode="lockstep", seed=0)
    states = Recorder(ros_node, JointState, f"{NS}/{topics.JOINT_STATES}")
    poses = Recorder(ros_node, PoseArray, f"{NS}/{topics.SIM_OBJECT_POSES}")
    observations = []
    for seed in (11, 11, 12):
        response = call_service(
            ros_node, ResetEnv, f"{NS}/{topics.SIM_RESET}", ResetEnv.Request(use_seed=True, seed=seed)
        )
        assert response.success and response.seed == seed, response.message
        observations.append(
            first_observation(ros_node, states, poses, response.stamp.sec + response.stamp.nanosec * 1e-9)
        )
    (joints_a, poses_a), (joints_b, poses_b), (_, poses_c) = observations
    np.testing.assert_array_equal(joints_a, joints_b)
    assert poses_a == poses_b
    assert poses_a[0] != poses_c[0]  # another seed places the block elsewhere
    success = call_service(ros_node, Trigger, f"{NS}/{topics.SIM_GET_SUCCESS}", Trigger.Request())
    assert success.success is False and "not (yet) successful" in success.message


def run_expert_episodes(processes, sim_env, ros_node, run, episodes=1):
    states = Recorder(ros_node, JointState, f"{NS}/{topics.JOINT_STATES}")
    bridge = start_bridge(processes, sim_env, name=f"bridge-{run}", mode="lockstep", seed=0)
    expert = processes.start(
        [
            venv_script("scripted_expert"),
            "--ros-args",
            "-r",
            f"__ns:={NS}",
            "-p",
            f"episodes:={episodes}",
            "-p",
            "seed:=0",
        ],
        name=f"expert-{run}",
        env=sim_env,
    )
    done = expert.wait_for_output(r"scripted expert done: (\d+)/(\d+) episodes successful", timeout=120)
    assert expert.wait(timeout=20) == 0
    bridge.stop()
    ros_node.destroy_subscription(states._sub)
    return {stamp_s(m): tuple(m.position) for m in states.snapshot()}, int(done.group(1)), bridge.output()


def test_lockstep_with_the_expert_is_deterministic_and_succeeds(processes, sim_env, ros_node):
    first, successes, log = run_expert_episodes(processes, sim_env, ros_node, run=1)
    assert successes == 1, log
    second, successes_again, _ = run_expert_episodes(processes, sim_env, ros_node, run=2)
    assert successes_again == 1
    common = sorted(set(first) & set(second))
    # Same stamps, same joint positions, step for step (both runs have about 75 steps; a probe slowed down
    # by a busy machine may miss some of them, which is not what this test is about).
    assert len(common) > 30 and len(common) >= 0.5 * max(len(first), len(second))
    assert all(first[t] == second[t] for t in common)


def test_bad_commands_are_rejected_with_a_log_line_and_the_bridge_keeps_running(processes, sim_env, ros_node):
    bridge = start_bridge(processes, sim_env, mode="realtime", seed=0)
    states = Recorder(ros_node, JointState, f"{NS}/{topics.JOINT_STATES}")
    before = np.array(states.wait_until(lambda m: len(m) > 5, 20, "joint_states")[-1].position)
    commands = ros_node.create_publisher(JointState, f"{NS}/{topics.JOINT_COMMANDS}", RELIABLE)
    trajectories = ros_node.create_publisher(JointTrajectory, f"{NS}/{topics.JOINT_TRAJECTORY}", RELIABLE)
    while ros_node.count_subscribers(f"{NS}/{topics.JOINT_COMMANDS}") == 0:
        time.sleep(0.05)
    bad = [
        (JointState(name=["elbow", "wrist"], position=[0.1, 0.2]), r"rejected joint_commands: .*unknown joint"),
        (JointState(name=list(DRIVER_JOINTS), position=[0.1] * 5), r"rejected joint_commands: .*6 joint names but 5"),
        (JointState(name=list(DRIVER_JOINTS), position=[float("nan")] * 6), r"rejected joint_commands: .*non-finite"),
    ]
    for msg, pattern in bad:
        commands.publish(msg)
        bridge.wait_for_output(pattern, timeout=10)
        time.sleep(1.1)  # warnings are throttled to one a second
    trajectories.publish(JointTrajectory(joint_names=list(DRIVER_JOINTS)))
    bridge.wait_for_output(r"rejected joint_trajectory: .*no points", timeout=10)
    count = len(states.snapshot())
    after = states.wait_until(lambda m: len(m) > count + 10, 20, "joint_states after the bad input")
    assert bridge.returncode is None
    np.testing.assert_allclose(after[-1].position, before, atol=0.02)  # nothing moved


@pytest.mark.parametrize(
    ("params", "gl", "message"),
    [
        ({"env_id": "so102"}, "egl", r"unknown environment id 'so102'"),
        ({"cameras": "front:64x48"}, "nonsense", r"MUJOCO_GL is 'nonsense'.*MUJOCO_GL=egl"),
        ({"cameras": "front:64x48"}, None, r"MUJOCO_GL is unset"),
        ({"mode": "turbo"}, "egl", r"mode 'turbo' is not one of realtime, lockstep, fast"),
    ],
)
def test_bad_configuration_fails_at_start_with_a_clear_error(processes, sim_env, params, gl, message):
    env = dict(sim_env)
    if gl is None:
        env.pop("MUJOCO_GL", None)
    else:
        env["MUJOCO_GL"] = gl
    bridge = start_bridge(processes, env, wait=False, **params)
    bridge.wait_for_output(rf"cannot start the sim bridge: .*{message}", timeout=60)
    assert bridge.wait(timeout=20) == 1
    assert "Traceback" not in bridge.output()


def test_pusht_runs_through_the_same_bridge_and_expert(processes, sim_env, ros_node):
    states = Recorder(ros_node, JointState, f"{NS}/{topics.JOINT_STATES}")
    start_bridge(processes, sim_env, env_id="pusht", fps=10.0, mode="lockstep", max_episode_steps=20, seed=0)
    expert = processes.start(
        [venv_script("scripted_expert"), "--ros-args", "-r", f"__ns:={NS}", "-p", "env_id:=pusht", "-p", "episodes:=1"],
        name="pusht-expert",
        env=sim_env,
    )
    # 20 steps; the expert may also answer the last observation before it sees the episode end (two topics).
    expert.wait_for_output(r"episode 0 \(seed 0\): time_limit after 2[01] commands", timeout=60)
    assert expert.wait(timeout=20) == 0
    # The episode can be over before the probe is matched; the waiting bridge re-sends its last observation.
    latest = states.wait_until(lambda m: len(m) > 0, 20, "pusht joint_states")[-1]
    assert tuple(latest.name) == ("agent_x", "agent_y")


def test_bridge_and_fake_hardware_arm_speak_the_same_topics(processes, sim_env, ros_node, tmp_path):
    """The real driver on simulated servos (namespace /real) next to the bridge (namespace /sim)."""
    processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            "--log-dir",
            str(tmp_path / "logs"),
            "lerobot_drivers",
            "so101_follower.launch.yaml",
            "fake_hardware:=true",
            "namespace:=real",
            "loop_rate:=30.0",
            f"fake_dir:={tmp_path / 'fake'}",
        ],
        name="fake_arm",
        env=sim_env,
    )
    argv = [venv_script("sim_bridge"), "--ros-args", "-r", "__ns:=/sim", "-p", "cameras:=''", "-p", "seed:=0"]
    processes.start(argv, name="bridge", env=sim_env).wait_for_output("sim bridge ready", timeout=60)
    for spec in topics.ARM_TOPICS:
        real_types = wait_for_topic(ros_node, f"/real/{spec.name}", timeout=60)
        assert wait_for_topic(ros_node, f"/sim/{spec.name}", timeout=20) == real_types == [spec.type]
    for name, info in (
        (topics.JOINT_STATES, ros_node.get_publishers_info_by_topic),
        (topics.JOINT_COMMANDS, ros_node.get_subscriptions_info_by_topic),
        (topics.JOINT_TRAJECTORY, ros_node.get_subscriptions_info_by_topic),
    ):
        (real,), (sim,) = info(f"/real/{name}"), info(f"/sim/{name}")
        assert (real.qos_profile.reliability, real.qos_profile.durability) == (
            sim.qos_profile.reliability,
            sim.qos_profile.durability,
        ), name

    real_states = Recorder(ros_node, JointState, f"/real/{topics.JOINT_STATES}")
    sim_states = Recorder(ros_node, JointState, f"/sim/{topics.JOINT_STATES}")
    real_states.wait_until(lambda m: len(m) > 3, 30, "fake arm joint_states")
    sim_states.wait_until(lambda m: len(m) > 3, 30, "bridge joint_states")
    real, sim = real_states.snapshot()[-1], sim_states.snapshot()[-1]
    assert list(real.name) == list(sim.name) == list(DRIVER_JOINTS)
    for msg in (real, sim):
        assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 6
        assert all(abs(q) < math.pi for q in msg.position)

    # The same command message moves both arms to the same joint angles (radians on both).
    target = np.array([0.3, -0.2, 0.4, 0.3, 0.5, 0.8])
    command = JointState(name=list(DRIVER_JOINTS), position=target.tolist())
    publishers = [
        ros_node.create_publisher(JointState, f"/{ns}/{topics.JOINT_COMMANDS}", RELIABLE) for ns in ("real", "sim")
    ]
    deadline = time.monotonic() + 30
    reached = False
    while time.monotonic() < deadline and not reached:
        for publisher in publishers:
            publisher.publish(command)
        time.sleep(0.1)
        reached = all(
            np.max(np.abs(np.array(rec.snapshot()[-1].position) - target)) < 0.06 for rec in (real_states, sim_states)
        )
    assert reached, (real_states.snapshot()[-1].position, sim_states.snapshot()[-1].position)
