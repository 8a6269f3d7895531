"""The kit on a real rclpy node (own context, no graph): declare, start-up checks, runtime changes, configure."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import ParameterType
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter

from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, Level, diagnostic_status
from lerobot_ros.node_kit.lifecycle import configure_transition
from lerobot_ros.node_kit.parameters import ParameterError, ParameterTable, param
from lerobot_ros.node_kit.ros import declare_parameters


@dataclass(frozen=True)
class Example:
    port: str = param("", "serial port")
    loop_rate: float = param(100.0, "control loop rate (Hz)", low=1.0, high=1000.0)
    quality: int = param(90, "JPEG quality", low=1, high=100, step=1, read_only=False)
    blend: str = param("crossfade", "how chunks meet", choices=("crossfade", "replace"), read_only=False)
    lower: tuple[float, ...] | None = param(None, "per-joint lower limits (rad)")


@pytest.fixture
def context(ros_domain):
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=ros_domain)
    yield ctx
    ctx.try_shutdown()


def make(context, cls=Node, **overrides):
    return cls("kit_probe", context=context, parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])


def test_declares_every_parameter_with_its_descriptor(context):
    node = make(context, port="/dev/ttyACM0", lower=[-1.0, -2.0])
    try:
        params = declare_parameters(node, Example)
        assert params.config == Example(port="/dev/ttyACM0", lower=(-1.0, -2.0))
        rate = node.describe_parameter("loop_rate")
        assert rate.description == "control loop rate (Hz)" and rate.read_only
        assert (rate.floating_point_range[0].from_value, rate.floating_point_range[0].to_value) == (1.0, 1000.0)
        quality = node.describe_parameter("quality")
        assert not quality.read_only and quality.integer_range[0].step == 1
        blend = node.describe_parameter("blend")
        assert blend.description == "how chunks meet (one of: crossfade, replace)"
        assert blend.additional_constraints == "one of ['crossfade', 'replace']"
        assert node.describe_parameter("lower").type == ParameterType.PARAMETER_DOUBLE_ARRAY
    finally:
        node.destroy_node()


def test_an_unset_parameter_without_default_is_none(context):
    node = make(context)
    try:
        assert declare_parameters(node, Example).config.lower is None
    finally:
        node.destroy_node()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"loop_rate": 0.5}, "/kit_probe: parameter loop_rate = 0.5 is not allowed: expected a double in 1.0..1000.0"),
        ({"loop_rate": 30}, "/kit_probe: parameter loop_rate = 30 is not allowed: expected a double"),
        ({"blend": "mix"}, "/kit_probe: parameter blend = 'mix' is not allowed: expected a string, one of crossfade"),
    ],
)
def test_a_bad_start_up_value_stops_the_node_with_one_line(context, overrides, message):
    node = make(context, **overrides)
    try:
        with pytest.raises(ParameterError) as caught:
            declare_parameters(node, Example)
        assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    finally:
        node.destroy_node()


def test_runtime_changes_are_checked_by_the_table_and_the_node_then_applied(context):
    node = make(context)
    applied = []
    try:
        params = declare_parameters(
            node,
            Example,
            check=lambda old, new, changed: "not while busy" if new.quality == 13 else None,
            applied=lambda config, changed: applied.append((config.quality, sorted(changed))),
        )
        assert node.set_parameters([Parameter("quality", value=50)])[0].successful
        assert params.config.quality == 50 and applied == [(50, ["quality"])]
        refused = node.set_parameters([Parameter("quality", value=0)])[0]
        assert not refused.successful and "quality" in refused.reason  # rclpy's range check, from the descriptor
        refused = node.set_parameters([Parameter("blend", value="mix")])[0]
        assert not refused.successful and "one of crossfade, replace" in refused.reason
        refused = node.set_parameters([Parameter("quality", value=13)])[0]
        assert not refused.successful and refused.reason == "not while busy"
        refused = node.set_parameters([Parameter("loop_rate", value=50.0)])[0]
        assert not refused.successful and "read-only" in refused.reason.replace("read only", "read-only")
        assert params.config == Example(quality=50) and node.get_parameter("quality").value == 50
        assert applied == [(50, ["quality"])]
    finally:
        node.destroy_node()


def test_a_prefixed_group_declares_and_follows_its_own_names(context):
    node = make(context, **{"front.quality": 40})
    try:
        group = declare_parameters(node, ParameterTable.of(Example).only(["port", "quality"]), prefix="front.")
        assert group.config == {"port": "", "quality": 40}
        assert not node.has_parameter("quality") and node.has_parameter("front.port")
        assert node.set_parameters([Parameter("front.quality", value=41)])[0].successful
        assert group.config["quality"] == 41
    finally:
        node.destroy_node()


def test_configure_fails_the_same_way_for_expected_and_unexpected_errors(context):
    node = make(context, cls=LifecycleNode)
    reasons = []
    try:

        def expected():
            raise ValueError("parameter port is empty")

        def unexpected():
            raise RuntimeError("boom")

        fail = reasons.append
        assert configure_transition(node, expected, expected=(ValueError,), on_failure=fail) == (
            TransitionCallbackReturn.FAILURE
        )
        assert configure_transition(node, unexpected, expected=(ValueError,), on_failure=fail) == (
            TransitionCallbackReturn.FAILURE
        )
        assert configure_transition(node, lambda: None, on_failure=fail) == TransitionCallbackReturn.SUCCESS
        assert reasons == ["parameter port is empty", "RuntimeError: boom"]
    finally:
        node.destroy_node()


def test_diagnostics_status_and_publisher(context):
    status = diagnostic_status("/a: b", Level.WARN, "slow", {"fps": 29.5, "dropped": 3}, hardware_id="cam")
    assert status.level == DiagnosticStatus.WARN and status.hardware_id == "cam"
    assert [(kv.key, kv.value) for kv in status.values] == [("fps", "29.5"), ("dropped", "3")]
    assert diagnostic_status("x", DiagnosticStatus.ERROR, "").level == DiagnosticStatus.ERROR
    node = make(context)
    try:
        received = []
        node.create_subscription(DiagnosticArray, "/diagnostics", received.append, 10)
        assert DiagnosticsPublisher(node).publish(status)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        for _ in range(50):
            if received:
                break
            executor.spin_once(timeout_sec=0.1)
        assert received and received[0].status[0].message == "slow" and received[0].header.stamp.sec > 0
    finally:
        node.destroy_node()


def test_a_lifecycle_node_defers_a_refused_choice_to_configure(context):
    """defer_errors: a string outside the choices fails configure, the node itself starts (with the default)."""
    node = make(context, cls=LifecycleNode, blend="mix")
    try:
        params = declare_parameters(node, Example, defer_errors=True)
        assert params.config.blend == "crossfade"
        with pytest.raises(ParameterError, match="parameter blend = 'mix' is not allowed"):
            params.require()
        assert configure_transition(node, params.require) == TransitionCallbackReturn.FAILURE
        assert node.set_parameters([Parameter("blend", value="replace")])[0].successful
        assert params.require().blend == "replace"
    finally:
        node.destroy_node()
    out_of_range = make(context, cls=LifecycleNode, loop_rate=0.5)
    try:
        with pytest.raises(ParameterError, match=r"loop_rate = 0\.5"):  # rclpy refuses it too: at once
            declare_parameters(out_of_range, Example, defer_errors=True)
    finally:
        out_of_range.destroy_node()


def test_a_node_started_with_a_bad_value_exits_1_with_one_line(ros_env):
    """run_node: ParameterError is a start-up error (`cannot start ...`, status 1), not a traceback."""
    import subprocess

    from lerobot_ros.testing import venv_script

    done = subprocess.run(
        [venv_script("demo_talker"), "--ros-args", "-p", "rate_hz:=5"],
        env=ros_env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert (
        "cannot start demo_talker: /demo_talker: parameter rate_hz = 5 is not allowed: "
        "expected a double in 0.1..1000.0 (write 5.0 for a double)" in done.stderr
    )
    assert "Traceback" not in done.stderr
