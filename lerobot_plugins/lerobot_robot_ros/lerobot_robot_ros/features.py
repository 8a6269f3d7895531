"""A contract's features as LeRobot's robot feature dicts, and values between the two (pure: no rclpy, no LeRobot).

LeRobot describes a robot by flat dicts: one ``name: float`` entry per joint value and one ``camera: (H, W, 3)``
entry per camera; `lerobot-record` stacks the floats into ``observation.state`` and stores each camera as
``observation.images.<camera>``. A contract's vector features (``observation.state``, and e.g. the sim's
``observation.environment_state``) give their per-dimension names (``shoulder_pan.pos``, degrees, as LeRobot's
SO-101 driver names them), camera features ``observation.images.<camera>`` their shape; the ``action`` feature
gives the action names. Values stay in the contract's dataset units; ROS units are the link's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract import Contract, ContractError, FeatureContract, load_contract

ACTION_KEY = "action"
OBSERVATION_PREFIX = "observation."
IMAGES_PREFIX = "observation.images."
# The contracts lerobot_ros installs (config/contracts/<name>.yaml), usable by name.
PRESETS = ("so101", "so100", "koch", "so101_sim", "ros2_control_arm", "mobile_base")


class ActionMismatchError(ValueError):
    """An action dict does not fit the contract's action feature (names missing, unknown, or not finite)."""


def resolve_contract(spec: str) -> Contract:
    """A preset name (`PRESETS`) or the path of a contract file -> the validated contract (ContractError)."""
    if spec in PRESETS:
        from lerobot_ros import share

        return load_contract(share.find(f"config/contracts/{spec}.yaml"))
    if not spec:
        raise ContractError("<none>", "contract", f"give a contract file or one of the presets {list(PRESETS)}")
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ContractError(str(path), "<file>", f"no such file; give a contract file or one of {list(PRESETS)}")
    return load_contract(path)


def camera_name(key: str) -> str:
    """`observation.images.front` -> `front` (LeRobot's camera key); other image keys lose `observation.`."""
    return key[len(IMAGES_PREFIX) :] if key.startswith(IMAGES_PREFIX) else key[len(OBSERVATION_PREFIX) :]


@dataclass(frozen=True)
class RobotFeatures:
    """Which contract features a LeRobot robot reads and writes, and their names on LeRobot's side."""

    contract: Contract
    observations: tuple[str, ...]
    action: FeatureContract | None

    @classmethod
    def from_contract(cls, contract: Contract, need_action: bool = True) -> RobotFeatures:
        """Every ``observation.*`` feature and the ``action`` feature (ContractError naming what does not fit)."""
        observations = tuple(k for k in contract.features if k.startswith(OBSERVATION_PREFIX))
        if not observations:
            raise ContractError(contract.source, "features", "declares no observation.* feature for the robot to read")
        for key in observations:
            feature = contract.features[key]
            if feature.is_image and not feature.is_visual:
                raise ContractError(
                    contract.source, f"features.{key}", "depth images have no LeRobot robot feature; leave it out"
                )
        action = contract.features.get(ACTION_KEY)
        if need_action and (action is None or action.is_image):
            raise ContractError(
                contract.source,
                f"features.{ACTION_KEY}",
                "the robot needs a vector action feature (e.g. a sensor_msgs/msg/JointState, "
                "trajectory_msgs/msg/JointTrajectory or geometry_msgs/msg/Twist topic)",
            )
        features = cls(contract, observations, action)
        names = [name for key in observations for name in features._names(key)]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ContractError(
                contract.source,
                "features",
                f"{repeated} name more than one observation value; LeRobot needs them unique",
            )
        return features

    def _names(self, key: str) -> list[str]:
        feature = self.contract.features[key]
        return [camera_name(key)] if feature.is_image else list(feature.dataset_names or ())

    @property
    def cameras(self) -> dict[str, str]:
        """LeRobot camera name -> contract key."""
        return {camera_name(k): k for k in self.observations if self.contract.features[k].is_image}

    @property
    def observation_features(self) -> dict[str, Any]:
        """LeRobot's `Robot.observation_features`: ``name: float`` per value, ``camera: (H, W, 3)`` per camera."""
        out: dict[str, Any] = {}
        for key in self.observations:
            feature = self.contract.features[key]
            if feature.is_image:
                out[camera_name(key)] = tuple(feature.shape)
            else:
                out.update(dict.fromkeys(feature.dataset_names or (), float))
        return out

    @property
    def action_names(self) -> list[str]:
        return list(self.action.dataset_names or ()) if self.action is not None else []

    @property
    def action_features(self) -> dict[str, type]:
        """LeRobot's `Robot.action_features`: ``name: float`` per action value."""
        return dict.fromkeys(self.action_names, float)

    def observation(self, values: Mapping[str, npt.NDArray[Any]]) -> dict[str, Any]:
        """Contract key -> value (dataset units, as the frame decoder gives them) -> LeRobot's observation dict."""
        out: dict[str, Any] = {}
        for key in self.observations:
            value = values[key]
            if self.contract.features[key].is_image:
                out[camera_name(key)] = value
            else:
                out.update(zip(self._names(key), (float(v) for v in value), strict=True))
        return out

    def action_vector(self, action: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        """LeRobot's action dict -> the action values in contract order (ActionMismatchError naming the problem)."""
        names = self.action_names
        missing = [n for n in names if n not in action]
        unknown = sorted(set(action) - set(names))
        if missing or unknown:
            raise ActionMismatchError(
                f"action {sorted(action)} does not fit contract {self.contract.source}: missing {missing}, "
                f"unknown {unknown}; it takes {names}"
            )
        values = np.array([float(action[n]) for n in names], dtype=np.float64)
        if not np.isfinite(values).all():
            bad = [n for n, v in zip(names, values, strict=True) if not np.isfinite(v)]
            raise ActionMismatchError(f"action values of {bad} are not finite; nothing was sent")
        return values

    def action_dict(self, values: npt.ArrayLike) -> dict[str, float]:
        """Action values in contract order -> LeRobot's action dict."""
        return dict(zip(self.action_names, (float(v) for v in np.asarray(values).reshape(-1)), strict=True))
