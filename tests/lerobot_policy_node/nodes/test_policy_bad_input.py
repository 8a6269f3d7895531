"""Bad input to the policy node and the executor, as processes: clear errors or a safe hold, never a bad command."""

from __future__ import annotations

import math
import threading
import time

import pytest
import yaml
from policy_outputs import PolicyOutputProbe

from lerobot_contract.time import NS
from lerobot_ros.testing import venv_script

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def write_contract(path, *, with_state: bool = True) -> str:
    names = [f"{j}.pos" for j in JOINTS]
    vector = {"type": "sensor_msgs/msg/JointState", "joints": JOINTS, "names": names, "units": "rad_to_deg"}
    features = {"action": {**vector, "topic": "/follower/joint_commands"}}
    if with_state:
        features["observation.state"] = {**vector, "topic": "/follower/joint_states", "max_age_s": 1.0}
    else:
        features["observation.environment_state"] = {**vector, "topic": "/follower/joint_states"}
    path.write_text(yaml.safe_dump({"robot_type": "so101_follower", "fps": 30, "features": features}))
    return str(path)


class PolicyProbe(PolicyOutputProbe):
    """Publishes joint_states (optionally stamped in the future), keeps chunks and the latched status."""

    def __init__(self, node, stamp_offset_s: float = 0.0) -> None:
        from sensor_msgs.msg import JointState

        super().__init__(node)
        self.offset_ns = int(stamp_offset_s * NS)
        self.publishing = False
        self.states = node.create_publisher(JointState, "/follower/joint_states", 10)
        node.create_timer(0.02, self._publish)

    def _publish(self) -> None:
        from rclpy.time import Time
        from sensor_msgs.msg import JointState

        if not self.publishing:
            return
        msg = JointState()
        msg.header.stamp = Time(nanoseconds=self.node.get_clock().now().nanoseconds + self.offset_ns).to_msg()
        msg.name, msg.position = JOINTS, [0.1] * 6
        self.states.publish(msg)


def start_policy(processes, contract: str, checkpoint: str = "scripted:delay=0.05,horizon=15", *extra: str):
    argv = [venv_script("policy_node"), "--ros-args", "-p", f"checkpoint:={checkpoint}", "-p", f"contract:={contract}",
            "-p", "max_observation_age:=1.0", *extra]  # fmt: skip
    return processes.start(argv, name="policy")


def test_features_the_contract_cannot_supply_fail_configure_with_the_names(tmp_path, processes, ros_node):
    probe = PolicyProbe(ros_node)
    policy = start_policy(processes, write_contract(tmp_path / "c.yaml", with_state=False))
    policy.wait_for_output(r"the policy needs \['observation.state'\], which contract .*c.yaml does not declare")
    status = probe.status(lambda s: s.state == "error")
    assert "observation.state" in status.message


def test_missing_topics_at_start_up_wait_then_run(tmp_path, processes, ros_node):
    probe = PolicyProbe(ros_node)
    start_policy(processes, write_contract(tmp_path / "c.yaml"))
    status = probe.status(lambda s: s.state == "active" and "waiting for the first usable message" in s.message)
    assert "/follower/joint_states" in status.message
    time.sleep(1.0)
    assert not probe.chunks
    probe.publishing = True
    probe.status(lambda s: s.chunks_published >= 3)
    chunk = probe.chunks[-1]
    assert list(chunk.names) == JOINTS and chunk.horizon == 15 and len(chunk.data) == 15 * 6
    assert chunk.inference_time == pytest.approx(0.05, abs=0.5)
    assert all(math.isfinite(v) for v in chunk.data)
    # Dataset units (degrees) back to ROS units: the scripted sine (10 degrees) stays around the state (0.1 rad).
    assert all(abs(v - 0.1) <= 2 * math.radians(10) + 1e-3 for v in chunk.data)


@pytest.mark.parametrize(
    ("fault", "message"),
    [("nan", "NaN/inf actions"), ("dim", r"shape \(15, 7\)")],
)
def test_bad_model_output_is_reported_and_never_published(tmp_path, processes, ros_node, fault, message):
    probe = PolicyProbe(ros_node)
    probe.publishing = True
    policy = start_policy(processes, write_contract(tmp_path / "c.yaml"), f"scripted:horizon=15,fault={fault}")
    policy.wait_for_output(message)
    status = probe.status(lambda s: "not published" in s.message)
    assert status.chunks_published == 0
    assert not probe.chunks


def test_observations_from_the_future_are_refused(tmp_path, processes, ros_node):
    probe = PolicyProbe(ros_node, stamp_offset_s=2.0)
    probe.publishing = True
    policy = start_policy(processes, write_contract(tmp_path / "c.yaml"))
    policy.wait_for_output("in the future")
    status = probe.status(lambda s: "future" in s.message)
    assert status.chunks_published == 0
    time.sleep(1.0)
    assert not probe.chunks


def test_executor_holds_when_sim_time_jumps_back(processes, ros_node):
    """A chunk on sim time, then /clock goes back (a sim reset): the executor drops the plan and holds."""
    from builtin_interfaces.msg import Duration
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.time import Time
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    from lerobot_msgs.msg import ActionChunk

    lock = threading.Lock()
    commands: list = []
    diagnostics: list = []
    clock_pub = ros_node.create_publisher(Clock, "/clock", 10)
    chunk_pub = ros_node.create_publisher(
        ActionChunk, "/policy/action_chunk", QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    )

    def keep(into: list):
        def on_message(msg) -> None:
            with lock:
                into.append(msg)

        return on_message

    ros_node.create_subscription(JointState, "/follower/joint_commands", keep(commands), 100)
    ros_node.create_subscription(DiagnosticArray, "/diagnostics", keep(diagnostics), 50)
    sim = {"now": 1000 * NS}

    def tick() -> None:
        sim["now"] += 10_000_000
        clock_pub.publish(Clock(clock=Time(nanoseconds=sim["now"]).to_msg()))

    ros_node.create_timer(0.01, tick)
    processes.start(
        [venv_script("action_executor"), "--ros-args", "-r", "__ns:=/follower", "-p", "use_sim_time:=true",
         "-p", f"joint_names:=[{','.join(JOINTS)}]", "-p", "joint_limits_lower:=[-2.0,-2.0,-2.0,-2.0,-2.0,-2.0]",
         "-p", "joint_limits_upper:=[2.0,2.0,2.0,2.0,2.0,2.0]", "-p", "max_velocity:=3.0",
         "-p", "output:=joint_commands", "-p", "rate:=50.0", "-p", "diagnostics_period:=0.2"],
        name="executor",
    ).wait_for_output("active", timeout=60)  # fmt: skip

    def send_chunk(value: float) -> None:
        msg = ActionChunk(names=JOINTS, horizon=200, period=Duration(nanosec=NS // 30), chunk_id=1)
        msg.header.stamp = Time(nanoseconds=sim["now"]).to_msg()
        msg.data = [value] * (200 * 6)
        chunk_pub.publish(msg)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not commands:
        send_chunk(0.3)
        time.sleep(0.5)
    assert commands, "the executor never commanded the chunk"
    sim["now"] = 10 * NS  # the simulation resets its clock

    def clock_jumped() -> dict | None:
        with lock:
            for array in reversed(diagnostics):
                for status in array.status:
                    values = {kv.key: kv.value for kv in status.values}
                    if int(values.get("clock_jumps", "0")) >= 1:
                        return values
        return None

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and clock_jumped() is None:
        time.sleep(0.1)
    values = clock_jumped()
    assert values is not None, "the executor never reported the clock jump"
    with lock:
        last = list(commands[-5:])
    assert all(list(m.position) == pytest.approx([0.3] * 6, abs=1e-6) for m in last)  # held, no jump
