"""Shared by the plugin tests: contracts cut to what a test's stack publishes, and a probe that keeps every
message of a topic with its stamp."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from lerobot_contract import load_contract
from lerobot_ros.testing import reference_venv

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lerobot_policy_node"))
from test_policy_launch_files import launch_fake_follower  # noqa: E402  (the fake-hardware SO-101 follower)

__all__ = ["LEROBOT_SCRIPT_MARKS", "REPO", "StampedHistory", "arm_contract", "launch_fake_follower"]

# The marks of a test that runs LeRobot's own scripts in LeRobot's environment with the plugins installed.
LEROBOT_SCRIPT_MARKS = [
    pytest.mark.ros,
    pytest.mark.reference,
    pytest.mark.skipif(
        not (reference_venv() / ".plugins-stamp").is_file(),
        reason="needs the LeRobot plugins in LeRobot's reference env (.venv-lerobot-ref): "
        "scripts/setup.sh --with-lerobot-plugins",
    ),
]


def arm_contract(tmp_path: Path, keys: tuple[str, ...] = ("observation.state", "action"), **topics: str) -> Path:
    """The shipped SO-101 contract with only `keys`; `topics` (feature key with '.' as '_') replace topics."""
    contract = load_contract(REPO / "config" / "contracts" / "so101.yaml").select(keys)
    data: dict[str, Any] = yaml.safe_load(yaml.safe_dump(dict(contract.raw)))
    for key, topic in topics.items():
        data["features"][key.replace("_", ".", 1)]["topic"] = topic
    path = tmp_path / "so101_arm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class StampedHistory:
    """Every message of `topic` seen by `node` (best effort, like the drivers publish), with its header stamp."""

    def __init__(self, node: Any, msg_type: Any, topic: str) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self.messages: list[tuple[int, Any]] = []
        self._lock = threading.Lock()
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._subscription = node.create_subscription(msg_type, topic, self._on_message, qos)

    def _on_message(self, msg: Any) -> None:
        with self._lock:
            self.messages.append((msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec, msg))

    def newest_at_or_before(self, t_ns: int) -> Any:
        """The newest message stamped at or before `t_ns` (the alignment rule), None if there is none."""
        with self._lock:
            older = [m for stamp, m in self.messages if stamp <= t_ns]
        return older[-1] if older else None

    def stamps(self) -> list[int]:
        with self._lock:
            return [s for s, _ in self.messages]
