"""`ContractLeader`: a leader arm's JointState topic as actions in a contract's dataset units (no LeRobot import).

The contract's `action` feature fixes the joints, their order, names and units (an SO-101 contract: degrees,
gripper 0..100, LeRobot's own); the leader's topic replaces the action topic (the follower's command topic).
`get_action()` is the newest leader sample by the project's alignment rule (`ContractLink`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from lerobot_contract import Contract, ContractError
from lerobot_robot_ros.features import ACTION_KEY, resolve_contract
from lerobot_robot_ros.link import ContractLink, RosLinkError


def leader_contract(contract: Contract, topic: str, key: str = ACTION_KEY) -> Contract:
    """`contract` reduced to feature `key`, read from `topic` (ContractError naming what does not fit)."""
    feature = contract.features.get(key)
    if feature is None or feature.is_image or feature.type != "sensor_msgs/msg/JointState":
        raise ContractError(contract.source, f"features.{key}", "the teleoperator needs a JointState vector feature")
    moved = dataclasses.replace(feature, topic=topic) if topic else feature
    return dataclasses.replace(contract.select([key]), features={key: moved})


class ContractLeader:
    """See the module docstring.

    Args:
        contract: a preset name, a contract file, or a `Contract`.
        topic: the leader's JointState topic (empty: the feature's own topic).
        key: the contract feature whose joints, names and units the actions take.
        connect_timeout_s: how long `connect()` waits for the first leader sample.
        action_timeout_s: `get_action()` refuses a newest sample older than this.
    """

    def __init__(
        self,
        contract: str | Path | Contract,
        topic: str = "/leader/joint_states",
        key: str = ACTION_KEY,
        connect_timeout_s: float = 10.0,
        action_timeout_s: float = 1.0,
    ) -> None:
        resolved = contract if isinstance(contract, Contract) else resolve_contract(str(contract))
        self.contract = leader_contract(resolved, topic, key)
        self.feature = self.contract.features[key]
        self.key = key
        self.connect_timeout_s = connect_timeout_s
        self.action_timeout_s = action_timeout_s
        self._link: ContractLink | None = None

    @property
    def action_features(self) -> dict[str, type]:
        return dict.fromkeys(self.feature.dataset_names or (), float)

    @property
    def is_connected(self) -> bool:
        return self._link is not None and self._link.is_open

    def connect(self) -> None:
        link = ContractLink(self.contract, (self.key,), "lerobot_teleoperator_ros")
        link.open(self.connect_timeout_s)
        self._link = link

    def get_action(self) -> dict[str, Any]:
        """The leader's newest aligned joint values, ``name: float`` in the contract's dataset units."""
        if self._link is None or not self._link.is_open:
            raise RosLinkError("the ROS teleoperator is not connected; call connect() first")
        frame = self._link.newest_frame()
        assert frame is not None  # connect() waited for it
        age = self._link.frame_age_s(frame)
        if age > self.action_timeout_s:
            raise RosLinkError(
                f"the leader's newest sample is {age:.2f} s old (action_timeout_s {self.action_timeout_s:g}): "
                f"{self._link.waiting()}"
            )
        values = self._link.values(frame)[self.key]
        return dict(zip(self.feature.dataset_names or (), (float(v) for v in values), strict=True))

    def disconnect(self) -> None:
        if self._link is not None:
            self._link.close()
        self._link = None
