"""`--teleop.type=ros`: the settings of `RosTeleoperator`."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.teleoperators.config import TeleoperatorConfig


@TeleoperatorConfig.register_subclass("ros")
@dataclass(kw_only=True)
class RosTeleoperatorConfig(TeleoperatorConfig):
    """A leader arm publishing sensor_msgs/JointState, read through a lerobot-ros contract.

    Attributes:
        contract: a preset (so101, so100, koch, so101_sim) or a contract file; its `action` feature gives the
            joints, names and units of the actions (the follower robot's action features).
        topic: the leader's JointState topic.
        connect_timeout_s: how long `connect()` waits for the first leader sample.
        action_timeout_s: `get_action()` refuses a newest sample older than this.
    """

    contract: str = "so101"
    topic: str = "/leader/joint_states"
    connect_timeout_s: float = 10.0
    action_timeout_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "action_timeout_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"teleop.{name} must be > 0 seconds, got {value}")
