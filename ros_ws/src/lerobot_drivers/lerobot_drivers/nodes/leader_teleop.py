"""Leader arm -> follower arm teleoperation (LeRobot's `lerobot-teleoperate` on ROS topics).

Subscribes to the leader driver's `joint_states`, maps them to follower targets (`teleop.leader_follower`:
body joints 1:1, gripper rescaled between the two calibrated ranges), keeps each target within
`max_relative_target` of the follower's measured position and publishes the follower's `joint_commands`.
A leader of another robot type, or a reading with other joints, never reaches the follower: the node
refuses to start, or drops the reading with an error. Without fresh leader or follower states nothing is
sent, so the follower driver holds (its own `command_timeout`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import rclpy
from rcl_interfaces.srv import GetParameters
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from lerobot_drivers.motors.calibration import check_calibration_location, load_calibration
from lerobot_drivers.motors.errors import CalibrationError
from lerobot_drivers.teleop.errors import TeleopError
from lerobot_drivers.teleop.leader_follower import LeaderFollowerMap, check_pair, clip_relative
from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, Level, diagnostic_status
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_node

STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


@dataclass(frozen=True)
class LeaderTeleopParameters:
    """The leader teleop node's parameters (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    leader_type: str = param("so101_leader", "LeRobot robot type of the leader arm")
    follower_type: str = param("so101_follower", "LeRobot robot type of the follower arm")
    leader_calibration: str = param("", "LeRobot calibration JSON of the leader")
    follower_calibration: str = param("", "LeRobot calibration JSON of the follower")
    leader_namespace: str = param("/leader", "namespace of the leader driver")
    follower_namespace: str = param("/follower", "namespace of the follower driver")
    max_relative_target: float = param(
        0.0, "max distance (rad) of a target from the follower's position; 0 = off", read_only=False
    )
    state_timeout: float = param(0.5, "leader/follower states older than this (s) are stale: nothing is sent")
    calibration_wait: float = param(0.0, "wait this long (s) for the calibration files to appear (fake hardware)")
    driver_name: str = param(
        "arm_driver", "node name of both arm drivers (their robot_type is checked); empty = no check"
    )


class LeaderTeleop(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("leader_teleop", **kwargs)

        self.params = declare_parameters(self, LeaderTeleopParameters)
        config = self.params.config
        leader, follower = check_pair(config.leader_type, config.follower_type)
        calibrations = []
        for role, spec in (("leader", leader), ("follower", follower)):
            path = config.leader_calibration if role == "leader" else config.follower_calibration
            if not path:
                raise TeleopError(f"{role}_calibration is not set: give the {spec.robot_type}'s calibration JSON")
            check_calibration_location(path, spec.robot_type, spec.calibration_kind)
            deadline = time.monotonic() + float(config.calibration_wait)
            while not os.path.exists(path) and time.monotonic() < deadline:
                time.sleep(0.1)
            calibrations.append(load_calibration(path))
        self.mapping = LeaderFollowerMap(leader, follower, calibrations[0], calibrations[1])
        self._lock = threading.Lock()
        self._follower: tuple[float, np.ndarray] | None = None
        self._stats = {"forwarded": 0, "clipped": 0, "rejected": 0, "stale": 0}
        self._last_error = ""
        self._last_error_log = 0.0
        leader_ns, follower_ns = str(config.leader_namespace).rstrip("/"), str(config.follower_namespace).rstrip("/")
        self._commands = self.create_publisher(JointState, f"{follower_ns}/joint_commands", COMMAND_QOS)
        self.create_subscription(JointState, f"{leader_ns}/joint_states", self._on_leader, STATE_QOS)
        self.create_subscription(JointState, f"{follower_ns}/joint_states", self._on_follower, STATE_QOS)
        self._diagnostics = DiagnosticsPublisher(self)
        self.create_timer(1.0, self._publish_diagnostics)
        # Forward nothing until both drivers say they run the arms this node was configured for.
        self._expected = {leader_ns: leader.robot_type, follower_ns: follower.robot_type}
        self._verified: set[str] = set()
        self._type_clients: dict[str, Any] = {}
        driver = str(config.driver_name)
        if driver:
            for ns in self._expected:
                self._type_clients[ns] = self.create_client(GetParameters, f"{ns}/{driver}/get_parameters")
            self._type_timer = self.create_timer(0.5, self._check_driver_types)
        else:
            self._verified = set(self._expected)
        self.get_logger().info(
            f"{leader.robot_type} ({leader_ns}) -> {follower.robot_type} ({follower_ns}), "
            f"max_relative_target {config.max_relative_target} rad"
        )

    @property
    def _config(self) -> LeaderTeleopParameters:
        return self.params.config

    def _on_follower(self, msg: JointState) -> None:
        order = {n: i for i, n in enumerate(msg.name)}
        if not all(n in order for n in self.mapping.joint_names):
            return
        position = np.array([msg.position[order[n]] for n in self.mapping.joint_names])
        with self._lock:
            self._follower = (time.monotonic(), position)

    def _reject(self, text: str) -> None:
        self._stats["rejected"] += 1
        self._last_error = text
        now = time.monotonic()
        if now - self._last_error_log > 2.0:
            self._last_error_log = now
            self.get_logger().error(f"leader reading not sent: {text}")

    def _check_driver_types(self) -> None:
        pending = [ns for ns in self._expected if ns not in self._verified]
        if not pending:
            self._type_timer.cancel()
            self.get_logger().info("drivers verified: forwarding the leader to the follower")
            return
        for ns in pending:
            client = self._type_clients[ns]
            if client.service_is_ready():
                future = client.call_async(GetParameters.Request(names=["robot_type"]))
                future.add_done_callback(lambda f, ns=ns: self._on_driver_type(ns, f))

    def _on_driver_type(self, ns: str, future: Any) -> None:
        values = future.result().values
        actual = values[0].string_value if values else ""
        expected = self._expected[ns]
        if actual == expected:
            self._verified.add(ns)
        else:
            self._reject(
                f"{ns} runs a {actual or 'driver without robot_type'}, not the {expected} this teleop is configured "
                "for: nothing is sent to the follower; fix leader_type/follower_type or the drivers"
            )

    def _on_leader(self, msg: JointState) -> None:
        if len(self._verified) < len(self._expected):
            return
        # The mapping is a handful of float operations: forwarding here adds no queueing latency.
        try:
            goal = self.mapping.map(list(msg.name), list(msg.position))
        except TeleopError as err:
            self._reject(str(err))
            return
        timeout = float(self._config.state_timeout)
        age = (self.get_clock().now() - rclpy.time.Time.from_msg(msg.header.stamp)).nanoseconds * 1e-9
        if age > timeout:
            self._stats["stale"] += 1
            return
        max_rel = float(self._config.max_relative_target)
        with self._lock:
            follower = self._follower
        if max_rel > 0:
            if follower is None or time.monotonic() - follower[0] > timeout:
                self._stats["stale"] += 1
                return
            goal, clipped = clip_relative(goal, follower[1], max_rel)
            self._stats["clipped"] += int(clipped)
        out = JointState(name=list(self.mapping.joint_names), position=goal.tolist())
        out.header.stamp = msg.header.stamp
        self._commands.publish(out)
        self._stats["forwarded"] += 1

    def _publish_diagnostics(self) -> None:
        if self._stats["forwarded"] == 0 and self._last_error:
            level, message = Level.ERROR, self._last_error
        elif self._stats["forwarded"] == 0:
            level, message = Level.WARN, "waiting for leader/follower joint_states"
        else:
            level, message = Level.OK, "forwarding"
        values = {k: str(v) for k, v in self._stats.items()} | {"last_error": self._last_error}
        self._diagnostics.publish(
            diagnostic_status(f"{self.get_fully_qualified_name()}: teleop", level, message, values)
        )


def main(args: list[str] | None = None) -> int:
    return run_node(
        LeaderTeleop,
        "leader_teleop",
        args=args,
        startup_errors=(TeleopError, CalibrationError, OSError),
        what="teleoperation",
    )


if __name__ == "__main__":
    sys.exit(main())
