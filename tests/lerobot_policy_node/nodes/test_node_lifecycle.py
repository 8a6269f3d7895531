"""Lifecycle transitions and parameter validation of both nodes, in-process (no other processes)."""

from __future__ import annotations

import pytest
import yaml
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

JOINTS = ["a", "b"]
LIMITS = {
    "joint_names": JOINTS,
    "joint_limits_lower": [-1.0, -1.0],
    "joint_limits_upper": [1.0, 1.0],
    "max_velocity": 3.0,
}


@pytest.fixture
def context(ros_domain):
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=ros_domain)
    yield ctx
    ctx.try_shutdown()


def make_executor(context, **params):
    from lerobot_policy_node.nodes.executor_node import ExecutorNode

    overrides = [Parameter(k, value=v) for k, v in {"autostart": False, **params}.items()]
    return ExecutorNode(context=context, parameter_overrides=overrides)


def scripted_policy_overrides(tmp_path):
    """A policy node's parameters: the scripted policy (horizon 4) on a contract with a state and an action."""
    contract = tmp_path / "c.yaml"
    feature = {"type": "sensor_msgs/msg/JointState", "joints": JOINTS, "names": JOINTS}
    features = {"action": {**feature, "topic": "/r/cmd"}, "observation.state": {**feature, "topic": "/r/js"}}
    contract.write_text(yaml.safe_dump({"robot_type": "x", "fps": 30, "features": features}))
    return [
        Parameter("autostart", value=False),
        Parameter("checkpoint", value="scripted:horizon=4"),
        Parameter("contract", value=str(contract)),
    ]


def test_executor_configure_checks_choices_and_limits(context):
    bad = make_executor(context, output="joint_velocities")
    assert bad.trigger_configure() == TransitionCallbackReturn.FAILURE
    bad.destroy_node()
    crossed = make_executor(context, **{**LIMITS, "joint_limits_lower": [1.0, 1.0], "joint_limits_upper": [0.0, 2.0]})
    assert crossed.trigger_configure() == TransitionCallbackReturn.FAILURE
    crossed.destroy_node()


@pytest.mark.parametrize("missing", ["joint_names", "joint_limits_lower", "joint_limits_upper", "max_velocity"])
def test_executor_without_robot_config_requires_joints_limits_and_max_velocity(context, missing):
    """Issue 18 item 6: no more locking onto the first chunk's joints, no more limits off by default."""
    node = make_executor(context, **{k: v for k, v in LIMITS.items() if k != missing})
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert node._executor is None
    node.destroy_node()


def test_executor_limits_come_from_the_robot_config(context, tmp_path):
    """The arm driver's section: the robot type's joints, the calibrated ranges, the driver's max_velocity."""
    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.motors.calibration import range_radians, save_calibration

    spec = get_arm("so101_follower")
    calibration = default_fake_calibration(spec)
    save_calibration(tmp_path / "follower.json", calibration)
    driver = {"robot_type": "so101_follower", "calibration_file": str(tmp_path / "follower.json"), "max_velocity": 2.0}
    robot = tmp_path / "robot.yaml"
    robot.write_text(yaml.safe_dump({"/follower/arm_driver": {"ros__parameters": driver}}))
    overrides = [Parameter(k, value=v) for k, v in {"autostart": False, "robot_config": str(robot)}.items()]
    from lerobot_policy_node.nodes.executor_node import ExecutorNode

    node = ExecutorNode(context=context, namespace="/follower", parameter_overrides=overrides)
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    config = node._executor.config
    assert config.joint_names == spec.joint_names and config.max_velocity == 2.0
    expected = [range_radians(calibration[n], spec.model(n).resolution) for n in spec.joint_names]
    assert list(config.lower) == pytest.approx([min(r) for r in expected])
    assert list(config.upper) == pytest.approx([max(r) for r in expected])
    assert node.get_parameter("max_velocity").value == 2.0
    refused = node.set_parameters([Parameter("max_velocity", value=5.0)])[0]
    assert not refused.successful and "<= 2.0" in refused.reason
    node.destroy_node()
    elsewhere = ExecutorNode(context=context, namespace="/arm2", parameter_overrides=overrides)
    assert elsewhere.trigger_configure() == TransitionCallbackReturn.FAILURE  # no /arm2 section in the file
    elsewhere.destroy_node()


def test_executor_parameters_apply_at_runtime_or_are_refused(context):
    node = make_executor(context, **LIMITS, output="joint_commands")
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    result = node.set_parameters([Parameter("max_velocity", value=2.5)])[0]
    assert result.successful and node._executor.config.max_velocity == 2.5
    result = node.set_parameters([Parameter("joint_limits_lower", value=[-1.0, -1.0])])[0]
    assert not result.successful and "unconfigured" in result.reason
    result = node.set_parameters([Parameter("max_velocity", value=-1.0)])[0]
    assert not result.successful  # outside the descriptor's range
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert node._executor is None
    node.destroy_node()


def test_policy_node_configure_fails_with_the_reason(context, tmp_path):
    from lerobot_policy_node.nodes.policy_node import PolicyNode

    contract = tmp_path / "c.yaml"
    feature = {"type": "sensor_msgs/msg/JointState", "joints": JOINTS, "names": JOINTS}
    contract.write_text(
        yaml.safe_dump({"robot_type": "x", "fps": 30, "features": {"action": {**feature, "topic": "/r/cmd"}}})
    )
    overrides = [
        Parameter("autostart", value=False),
        Parameter("checkpoint", value="scripted"),
        Parameter("contract", value=str(contract)),
    ]
    node = PolicyNode(context=context, parameter_overrides=overrides)
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert node._state == "error" and "observation.state" in node._message
    node.destroy_node()
    missing = [Parameter("autostart", value=False), Parameter("checkpoint", value=str(tmp_path / "none"))]
    node = PolicyNode(context=context, parameter_overrides=missing)
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert "neither a directory nor a Hub repo id" in node._message
    node.destroy_node()


def test_policy_node_runtime_threshold_and_transitions(context, tmp_path):
    from lerobot_policy_node.nodes.policy_node import PolicyNode

    node = PolicyNode(context=context, parameter_overrides=scripted_policy_overrides(tmp_path))
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert node.set_parameters([Parameter("threshold", value=0.8)])[0].successful
    assert node._scheduler.config.threshold == 0.8
    assert not node.set_parameters([Parameter("checkpoint", value="other")])[0].successful  # read-only
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert node._state == "active"
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert node._state == "unconfigured"
    node.destroy_node()


def test_executor_tick_loop_failure_holds_reports_error_and_leaves_active(context):
    """No thread dies silently: an unexpected exception in the tick loop sends a hold, turns the executor's status
    to ERROR and takes the node through its error transition to unconfigured."""
    import threading
    import time

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    node = make_executor(context, **LIMITS, output="joint_commands", diagnostics_period=0.05)
    listener = rclpy.create_node("listener", context=context)
    lock = threading.Lock()
    commands: list = []
    statuses: list = []

    def keep_status(msg) -> None:
        with lock:
            statuses.extend(msg.status)

    listener.create_subscription(JointState, "joint_commands", lambda m: commands.append(list(m.position)), 10)
    listener.create_subscription(DiagnosticArray, "/diagnostics", keep_status, 50)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(listener)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        with node._lock:
            node._executor.reset([0.25, -0.5], node._now())

        def broken_tick(now: int) -> None:
            raise RuntimeError("injected tick failure")

        node._tick = broken_tick
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and node._state_machine.current_state[1] != "unconfigured":
            time.sleep(0.02)
        assert node._state_machine.current_state[1] == "unconfigured"
        while time.monotonic() < deadline:
            with lock:
                errors = [s for s in statuses if s.level == DiagnosticStatus.ERROR]
            if any(s.name.endswith("action executor") for s in errors) and commands:
                break
            time.sleep(0.02)
        assert commands and commands[-1] == pytest.approx([0.25, -0.5])  # the hold where it was commanded
        worker = [s for s in errors if s.name.endswith("tick loop")]
        assert worker and worker[0].message == "tick loop failed: RuntimeError: injected tick failure"
        own = [s for s in errors if s.name.endswith("action executor")]
        assert own and "tick loop failed" in own[-1].message
    finally:
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5)
        listener.destroy_node()
        node.destroy_node()


def test_policy_node_dispatcher_failure_is_an_error_state(context, tmp_path):
    """An unexpected exception in the inference dispatcher: status 'error' with the reason, unconfigured."""
    import threading
    import time

    from rclpy.executors import SingleThreadedExecutor

    from lerobot_policy_node.nodes.policy_node import PolicyNode

    node = PolicyNode(context=context, parameter_overrides=scripted_policy_overrides(tmp_path))
    statuses: list = []
    node._status_pub.publish = statuses.append  # what ~/status carries
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS

        def broken_dispatch(stop, workers) -> None:
            raise KeyError("injected dispatcher failure")

        node._dispatch = broken_dispatch
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and node._state_machine.current_state[1] != "unconfigured":
            time.sleep(0.02)
        assert node._state_machine.current_state[1] == "unconfigured"
        assert node._policy is None and node._dispatcher is None
        last = statuses[-1]
        assert last.state == "error"
        assert last.message == "inference dispatch failed: KeyError: 'injected dispatcher failure'"
    finally:
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5)
        node.destroy_node()


def action_chunk(node, horizon: int, value: float = 0.5):
    """An ActionChunk for JOINTS stamped now, 10 ms steps, built without a per-step Python loop."""
    import array

    import numpy as np

    from lerobot_msgs.msg import ActionChunk

    msg = ActionChunk(names=JOINTS, horizon=horizon, chunk_id=horizon)
    msg.period.nanosec = 10_000_000
    msg.header.stamp = node.get_clock().now().to_msg()
    msg.data = array.array("f", np.full(horizon * len(JOINTS), value, dtype=np.float32).tobytes())
    return msg


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"{what} within {timeout} s")


def test_ticks_go_on_while_a_100000_step_chunk_is_taken_over(context, monkeypatch):
    """Issue 29: taking a 10,000-step chunk over cost ~39 ms (100,000: ~385 ms) inside the tick thread, with its
    lock held, and the 100 Hz stream stalled. The O(horizon) work runs in the chunk thread without the lock: here
    it is held up inside the conversion of a 100,000-step chunk, and the tick thread keeps ticking meanwhile."""
    import threading

    import lerobot_policy_node.core.executor as core

    entered, release = threading.Event(), threading.Event()
    convert = core.chunk_from_rows

    def held_up(*args, **kwargs):
        entered.set()
        assert release.wait(120), "the test never released the conversion"
        return convert(*args, **kwargs)

    monkeypatch.setattr(core, "chunk_from_rows", held_up)
    node = make_executor(context, **LIMITS, output="joint_commands", rate=100.0, max_chunk_steps=200_000)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        with node._lock:
            node._executor.reset([0.0, 0.0], node._now())
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        node._on_chunk(action_chunk(node, 100_000))
        wait_for(entered.is_set, "the chunk thread never started converting the chunk")
        ticks = node._ticks
        wait_for(lambda: node._ticks >= ticks + 20, "no 20 ticks while the chunk was being taken over")
        assert node._executor.stats.chunks_accepted == 0  # still held up: the ticks above ran beside it
        release.set()
        wait_for(lambda: node._executor.stats.chunks_accepted == 1, "the 100,000-step chunk was never taken over")
        assert node._executor.plan.end_ns - node._executor.plan.times_ns[0] > 900 * 10**9  # ~1000 s of plan
        ticks = node._ticks
        wait_for(lambda: node._ticks >= ticks + 5, "the tick thread stopped after the take-over")
    finally:
        release.set()
        node.trigger_deactivate()
        node.destroy_node()


def test_old_and_long_chunks_are_refused_by_parameter(context):
    """max_chunk_age / max_chunk_steps reach the executor; refusals are counted per reason."""
    node = make_executor(context, **LIMITS, output="joint_commands", max_chunk_age=0.5, max_chunk_steps=50)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        config = node._executor.config
        assert config.max_chunk_age_s == 0.5 and config.max_chunk_steps == 50
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        old = action_chunk(node, 50)
        old.header.stamp.sec -= 3600  # an hour-old observation whose 50 steps still reach... the past: stale
        node._on_chunk(old)
        wait_for(lambda: node._executor.stats.chunks_rejected.get("stale") == 1, "no stale refusal")
        old = action_chunk(node, 10)
        old.period.sec, old.period.nanosec = 10, 0  # 10 s steps: the horizon reaches the present
        old.header.stamp.sec -= 60
        node._on_chunk(old)
        wait_for(lambda: node._executor.stats.chunks_rejected.get("too_old") == 1, "no too_old refusal")
        node._on_chunk(action_chunk(node, 51))
        wait_for(lambda: node._executor.stats.chunks_rejected.get("too_long") == 1, "no too_long refusal")
        node._on_chunk(action_chunk(node, 50))
        wait_for(lambda: node._executor.stats.chunks_accepted == 1, "the valid chunk was not taken")
    finally:
        node.trigger_deactivate()
        node.destroy_node()


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="SCHED_FIFO needs root here")
def test_realtime_runs_the_tick_thread_sched_fifo_and_says_so(context):
    import os

    node = make_executor(
        context, **LIMITS, output="joint_commands", realtime=True, realtime_priority=10, realtime_lock_memory=False
    )
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        wait_for(node._realtime.reports, "the tick thread never applied its real-time settings")
        report = node._realtime.reports()[0]
        assert report.thread == "tick loop" and report.refused == ()
        assert os.sched_getscheduler(report.native_id) == os.SCHED_FIFO
        values = node._realtime.diagnostic_values()
        assert values["realtime_policy"] == "SCHED_FIFO 10" and values["realtime_refused"] == ""
    finally:
        node.trigger_deactivate()
        node.destroy_node()


def test_a_stop_during_a_takeover_is_the_last_trajectory_sent(context, monkeypatch):
    """The JointTrajectory of a new chunk is built off the lock (O(horizon)); a software stop arriving meanwhile
    sends its one-point hold at once. The trajectory must not go out after that hold: the robot would move on."""
    import threading

    from std_srvs.srv import SetBool

    from lerobot_policy_node.nodes import executor_node

    node = make_executor(context, **LIMITS, output="joint_trajectory")
    sent: list = []
    lock = threading.Lock()

    class Recorder:
        topic_name = "joint_trajectory"

        def publish(self, msg) -> None:
            with lock:
                sent.append(len(msg.points))

        def get_subscription_count(self) -> int:
            return 0

    build = executor_node.remaining_trajectory

    def stopped_meanwhile(start):
        node._on_enable(SetBool.Request(data=False), SetBool.Response())
        return build(start)

    monkeypatch.setattr(executor_node, "remaining_trajectory", stopped_meanwhile)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        with node._lock:
            node._executor.reset([0.0, 0.0], node._now())
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        real, node._publisher = node._publisher, Recorder()
        node._on_chunk(action_chunk(node, 50))
        wait_for(lambda: node._executor.stats.chunks_accepted == 1 and not node._executor.enabled, "no take-over")
        node.stop_thread()  # the chunk thread has finished whatever it was sending
        with lock:
            assert sent and sent[-1] == 1, f"points of each JointTrajectory sent, in order: {sent}"
        node._publisher = real
    finally:
        node.trigger_deactivate()
        node.destroy_node()
