"""What `send_action()` publishes: the contract's `action` feature written back into a message of its type.

The contract reads an action from a message (`field`: one dotted path or a list of them, `joints` picked by name
from `joint_names_field`); `ActionCommand` writes values the same way round, so any message a contract can record
is one the robot can send:

* `sensor_msgs/msg/JointState` (`field: position`, `joints`): the arm drivers' `joint_commands`;
* `trajectory_msgs/msg/JointTrajectory` (`field: points.0.positions`, `joint_names_field: joint_names`): one point
  reached one frame period (1 / fps) after it arrives, `header.stamp` zero (start on receipt, as ros2_control's
  JointTrajectoryController and the arm driver read it);
* `std_msgs/msg/Float64MultiArray` (`field: data`, `names`): ros2_control's ForwardCommandController;
* `geometry_msgs/msg/Twist` (`field: [linear.x, linear.y, angular.z]`, `names`): a mobile base's velocity, and
  `TwistStamped` with `twist.linear.x`... paths.

A path naming a scalar takes one value, a path naming an array the rest (at most one such path). Messages with a
`header` other than trajectories are stamped with the time given. Needs the message packages (rosidl), not rclpy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract import ContractError, FeatureContract
from lerobot_contract.time import NS
from lerobot_ros.message_conversion import (
    MessageConversionError,
    field_type,
    import_message_type,
    is_array_type,
    message_fields,
    message_from_dict,
)

TRAJECTORY_TYPE = "trajectory_msgs/msg/JointTrajectory"


def nested_values(paths_values: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """[("points.0.positions", [..]), ("joint_names", [..])] -> {"points": [{"positions": [..]}], ...}: the mapping
    `message_from_dict` fills a message from (numbers in a path index lists, padded with empty entries)."""
    root: dict[str, Any] = {}
    for path, value in paths_values:
        parts = path.split(".")
        node: Any = root
        for part, following in itertools.pairwise(parts):
            empty: Any = [] if following.isdigit() else {}
            if part.isdigit():
                index = int(part)
                node.extend({} for _ in range(index + 1 - len(node)))
                if node[index] == {} and isinstance(empty, list):
                    node[index] = empty
                node = node[index]
            else:
                node = node.setdefault(part, empty)
        last = parts[-1]
        if last.isdigit():
            index = int(last)
            node.extend(0.0 for _ in range(index + 1 - len(node)))
            node[index] = value
        else:
            node[last] = value
    return root


class ActionCommand:
    """Builds the action message of a contract's `action` feature from values in ROS units, in contract order.

    Args:
        feature: the contract's action feature (a vector feature).
        fps: the contract's frame rate (a trajectory point is reached one period after it arrives).

    Raises ContractError (one line) when the message type is not installed or a path does not fit it.
    """

    def __init__(self, feature: FeatureContract, fps: float) -> None:
        self.feature = feature
        where = f"features.{feature.key}"
        try:
            self.msg_type = import_message_type(feature.type)
            arrays = [is_array_type(field_type(self.msg_type, path)) for path in feature.field_paths]
            if feature.joints is not None:
                field_type(self.msg_type, feature.joint_names_field)
        except MessageConversionError as err:
            raise ContractError(feature.source, where, f"cannot write the action into {feature.type}: {err}") from None
        if sum(arrays) > 1:
            raise ContractError(
                feature.source, f"{where}.field", "names more than one array; a command can fill only one of them"
            )
        scalars = len(arrays) - sum(arrays)
        if (sum(arrays) == 0 and scalars != feature.size) or scalars > feature.size:
            raise ContractError(
                feature.source, f"{where}.field", f"{scalars} scalar field(s) for {feature.size} action values"
            )
        self._arrays = arrays
        self._has_header = any(f.name == "header" for f in message_fields(self.msg_type))
        self._period_s = 1.0 / fps
        self._trajectory = feature.type == TRAJECTORY_TYPE

    def values(self, ros_values: npt.ArrayLike, stamp_ns: int) -> dict[str, Any]:
        """The field mapping of the message for `ros_values` (see `nested_values`)."""
        values = [float(v) for v in np.asarray(ros_values, dtype=np.float64).reshape(-1)]
        if len(values) != self.feature.size:
            raise ValueError(f"{self.feature.key} takes {self.feature.size} values, got {len(values)}")
        array_size = len(values) - (len(self._arrays) - sum(self._arrays))
        items: list[tuple[str, Any]] = []
        at = 0
        for path, is_array in zip(self.feature.field_paths, self._arrays, strict=True):
            if is_array:
                items.append((path, values[at : at + array_size]))
                at += array_size
            else:
                items.append((path, values[at]))
                at += 1
        if self.feature.joints is not None:
            items.append((self.feature.joint_names_field, list(self.feature.joints)))
        mapping = nested_values(items)
        if self._trajectory:
            for point in mapping.get("points", []):
                point["time_from_start"] = self._period_s
        elif self._has_header:
            mapping["header"] = {"stamp": {"sec": stamp_ns // NS, "nanosec": stamp_ns % NS}}
        return mapping

    def message(self, ros_values: npt.ArrayLike, stamp_ns: int) -> Any:
        """A message of the feature's type carrying `ros_values` (ROS units, contract order)."""
        return message_from_dict(self.msg_type, self.values(ros_values, stamp_ns))
