"""The joints, position limits and velocity limit the executor enforces, from a robot configuration (pure).

A robot configuration is a ROS 2 parameters file (`config/robots/*.yaml`). For the executor at
``/<ns>/action_executor`` it is read in this order:

1. a ``/<ns>/action_executor`` section stating them (simulated arms, arms behind ros2_control)::

       /follower/action_executor:
         ros__parameters:
           joint_names: [shoulder_pan, ...]
           joint_limits_lower: [-1.92, ...]   # rad
           joint_limits_upper: [1.92, ...]
           max_velocity: 3.0                  # rad/s

2. the ``/<ns>/arm_driver`` section of our arm driver: the joints of its `robot_type`, the calibrated range of
   each joint from its `calibration_file` (in radians, exactly the range the driver clips to) and its
   `max_velocity` (the driver's default, 3 rad/s, when unset).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lerobot_policy_node.core.errors import PolicyConfigError
from lerobot_ros.bounded_yaml import load_yaml

# The arm driver's own default (lerobot_drivers.nodes.arm_driver.DEFAULT_MAX_VELOCITY; not imported: it is a node).
DRIVER_DEFAULT_MAX_VELOCITY = 3.0
LIMIT_KEYS = ("joint_names", "joint_limits_lower", "joint_limits_upper", "max_velocity")


@dataclass(frozen=True)
class RobotLimits:
    """What the executor drives and how far and fast it may command it (radians, rad/s)."""

    joint_names: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_velocity: float
    source: str

    def __post_init__(self) -> None:
        where = f"{self.source}: "
        if not self.joint_names:
            raise PolicyConfigError(f"{where}joint_names is empty")
        if len(set(self.joint_names)) != len(self.joint_names):
            raise PolicyConfigError(f"{where}joint_names repeat: {list(self.joint_names)}")
        for name, values in (("joint_limits_lower", self.lower), ("joint_limits_upper", self.upper)):
            if len(values) != len(self.joint_names):
                raise PolicyConfigError(
                    f"{where}{name} has {len(values)} values for the {len(self.joint_names)} joints "
                    f"{list(self.joint_names)}"
                )
            if not all(math.isfinite(v) for v in values):
                raise PolicyConfigError(f"{where}{name} must be finite numbers, got {list(values)}")
        crossed = [n for n, lo, hi in zip(self.joint_names, self.lower, self.upper, strict=True) if not lo < hi]
        if crossed:
            raise PolicyConfigError(f"{where}lower limit not below the upper one for {crossed}")
        if not (math.isfinite(self.max_velocity) and self.max_velocity > 0):
            raise PolicyConfigError(f"{where}max_velocity must be a finite number > 0 (rad/s), got {self.max_velocity}")

    def narrowed(
        self, lower: Sequence[float] | None, upper: Sequence[float] | None, max_velocity: float | None
    ) -> RobotLimits:
        """Tighter limits given on top (explicit parameters): the stricter of both applies."""
        lo = self.lower if lower is None else tuple(max(a, float(b)) for a, b in zip(self.lower, lower, strict=True))
        hi = self.upper if upper is None else tuple(min(a, float(b)) for a, b in zip(self.upper, upper, strict=True))
        speed = self.max_velocity if not max_velocity else min(self.max_velocity, float(max_velocity))
        return RobotLimits(self.joint_names, lo, hi, speed, self.source)


def limits_from_parameters(values: Mapping[str, Any], source: str) -> RobotLimits:
    """`RobotLimits` from the four parameters; a missing one raises naming it."""
    missing = [key for key in LIMIT_KEYS if values.get(key) in (None, [], (), 0, 0.0, "")]
    if missing:
        raise PolicyConfigError(
            f"{source}: parameter {missing[0]} is required (missing: {', '.join(missing)}); set robot_config to a "
            "config/robots/*.yaml, or set joint_names, joint_limits_lower, joint_limits_upper (rad) and max_velocity "
            "(rad/s)"
        )
    try:
        return RobotLimits(
            tuple(str(n) for n in values["joint_names"]),
            tuple(float(v) for v in values["joint_limits_lower"]),
            tuple(float(v) for v in values["joint_limits_upper"]),
            float(values["max_velocity"]),
            source,
        )
    except (TypeError, ValueError) as err:
        raise PolicyConfigError(f"{source}: {err}") from None


def load_robot_limits(path: str | Path, executor_name: str) -> RobotLimits:
    """The executor's limits from robot configuration `path` for the executor node `executor_name` (e.g.
    ``/follower/action_executor``); raises PolicyConfigError naming the file and what is missing."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text())
    except FileNotFoundError:
        raise PolicyConfigError(f"robot_config {path} does not exist") from None
    except (OSError, yaml.YAMLError) as err:
        raise PolicyConfigError(f"robot_config {path}: cannot read it: {err}") from None
    if not isinstance(data, dict):
        raise PolicyConfigError(f"robot_config {path}: expected a ROS 2 parameters file (a mapping of node names)")
    namespace = executor_name.rsplit("/", 1)[0] or ""
    own = _section(data, executor_name)
    if own is not None:
        return limits_from_parameters(own, f"robot_config {path} [{executor_name}]")
    driver_name = f"{namespace}/arm_driver"
    driver = _section(data, driver_name)
    if driver is not None:
        return _from_arm_driver(driver, f"robot_config {path} [{driver_name}]")
    sections = ", ".join(str(k) for k in data) or "none"
    raise PolicyConfigError(
        f"robot_config {path}: no {executor_name} or {driver_name} section (it has: {sections}); check the "
        "executor's namespace"
    )


def _section(data: Mapping[Any, Any], node: str) -> Mapping[str, Any] | None:
    for key in (node, node.lstrip("/")):
        entry = data.get(key)
        if isinstance(entry, dict):
            params = entry.get("ros__parameters")
            return params if isinstance(params, dict) else {}
    return None


def _from_arm_driver(params: Mapping[str, Any], source: str) -> RobotLimits:
    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.motors.calibration import load_calibration, range_radians
    from lerobot_drivers.motors.errors import CalibrationError

    robot_type = params.get("robot_type")
    if not robot_type:
        raise PolicyConfigError(f"{source}: robot_type is required to know the joints")
    try:
        spec = get_arm(str(robot_type))
    except ValueError as err:
        raise PolicyConfigError(f"{source}: {err}") from None
    calibration_file = params.get("calibration_file")
    if not calibration_file:
        raise PolicyConfigError(f"{source}: calibration_file is required for the calibrated joint ranges")
    try:
        calibration = load_calibration(str(calibration_file))
        ranges = [range_radians(calibration[n], spec.model(n).resolution) for n in spec.joint_names]
    except CalibrationError as err:
        raise PolicyConfigError(f"{source}: {err}") from None
    except KeyError as err:
        raise PolicyConfigError(f"{source}: calibration {calibration_file} has no motor {err}") from None
    lower = [min(r) for r in ranges]
    upper = [max(r) for r in ranges]
    for which, values in (("lower", lower), ("upper", upper)):
        given = params.get(f"joint_limits_{which}")
        if given:  # the driver narrows its calibrated range with these
            if len(given) != len(values):
                raise PolicyConfigError(f"{source}: joint_limits_{which} needs {len(values)} values")
            pick = max if which == "lower" else min
            values[:] = [pick(a, float(b)) for a, b in zip(values, given, strict=True)]
    return RobotLimits(
        tuple(spec.joint_names),
        tuple(lower),
        tuple(upper),
        float(params.get("max_velocity", DRIVER_DEFAULT_MAX_VELOCITY)),
        source,
    )
