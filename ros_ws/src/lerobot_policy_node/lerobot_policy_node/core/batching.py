"""One policy serving several robots (the policy node's `robots` parameter; pure, no rclpy).

Each robot lives in its own namespace and has its own copy of the contract's topics: the contract's robot
namespace (the namespace of its `action` topic, e.g. ``/follower``) is replaced by the robot's, and the other
absolute topics (cameras, ``/cameras/front/image_raw``) move under the robot's namespace
(``/robot_0/cameras/front/image_raw``), which is how `lerobot-ros eval --through-ros` remaps each sim bridge.

Inferences of several robots that are due together run as one batch: a checkpoint through
`CheckpointPolicy.predict_chunks` (a robot's chunk does not depend on the other rows of its batch); other
in-process policies (scripted ones keep per-episode state) get one copy per robot, called one after the other.
A policy server (`grpc://`) keeps one episode state for every caller and is refused.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract import Contract
from lerobot_policy_node.core.errors import PolicyConfigError
from lerobot_policy_node.core.policies import CheckpointPolicy, ChunkPolicy, RemotePolicy

_NAMESPACE = re.compile(r"^(/[A-Za-z][A-Za-z0-9_]*)+$")


def parse_robots(values: Sequence[str] | None) -> tuple[str, ...]:
    """The robots' namespaces (absolute, unique); empty: the node serves the contract's own robot."""
    robots = tuple(str(v).strip() for v in (values or ()))
    for robot in robots:
        if not _NAMESPACE.match(robot):
            raise PolicyConfigError(
                f"robots: {robot!r} is not an absolute ROS namespace (like /robot_0); give one namespace per robot"
            )
    duplicates = sorted(name for name, count in Counter(robots).items() if count > 1)
    if duplicates:
        raise PolicyConfigError(f"robots: {', '.join(duplicates)} given more than once; one namespace per robot")
    return robots


def contract_namespace(contract: Contract) -> str:
    """The contract's robot namespace: that of its action topic (``/`` when the topic has none)."""
    if "action" not in contract.features:
        raise PolicyConfigError("the contract has no `action` feature: it names no robot namespace to replace")
    return contract.features["action"].topic.rsplit("/", 1)[0] or "/"


def robot_topic(topic: str, contract_ns: str, robot: str) -> str:
    """`topic` of the contract for the robot in namespace `robot` (see the module docstring)."""
    if contract_ns != "/" and (topic == contract_ns or topic.startswith(contract_ns + "/")):
        return robot + topic[len(contract_ns) :]
    return robot + (topic if topic.startswith("/") else "/" + topic)


def robot_contract(contract: Contract, robot: str) -> Contract:
    """`contract` with every topic moved to the robot in namespace `robot`."""
    namespace = contract_namespace(contract)
    data = copy.deepcopy(contract.to_dict())  # to_dict shares the contract's own nested dicts
    for feature in data["features"].values():
        feature["topic"] = robot_topic(str(feature["topic"]), namespace, robot)
    return Contract.from_dict(data, source=f"{contract.source} for {robot}")


class RobotBatchPolicy:
    """`policy` answering the robots `0..count-1`: see the module docstring."""

    def __init__(self, policy: ChunkPolicy, count: int) -> None:
        if isinstance(policy, RemotePolicy):
            raise PolicyConfigError(
                f"robots: {policy.name} keeps one episode state for every caller; serve several robots with a "
                "checkpoint or a scripted policy in the node (or one policy node per robot)"
            )
        self.policy = policy
        self._copies: list[ChunkPolicy] | None = None
        if not isinstance(policy, CheckpointPolicy):
            self._copies = [copy.deepcopy(policy) for _ in range(count)]

    def predict(self, requests: Sequence[tuple[int, Mapping[str, Any]]]) -> list[npt.NDArray[np.float64]]:
        """Chunks for `(robot, observation)` pairs, in order (one batch for a checkpoint)."""
        if self._copies is not None:
            return [np.asarray(self._copies[r].predict_chunk(o), dtype=np.float64) for r, o in requests]
        assert isinstance(self.policy, CheckpointPolicy)
        return self.policy.predict_chunks([o for _, o in requests])


class BatchSizes:
    """How many batched inferences ran with each batch size (the node's /diagnostics)."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()

    def add(self, size: int) -> None:
        self.counts[size] += 1

    @property
    def batches(self) -> int:
        return sum(self.counts.values())

    @property
    def batched(self) -> int:
        """Batches of more than one robot."""
        return sum(n for size, n in self.counts.items() if size > 1)

    def text(self) -> str:
        """``size:count`` pairs, smallest size first (``1:12,2:30``)."""
        return ",".join(f"{size}:{n}" for size, n in sorted(self.counts.items()))

    def diagnostic_values(self) -> dict[str, str]:
        """`batches`, `batched_inferences` and `batch_sizes` once a batch ran; nothing before the first one.

        A reader that finds `batch_sizes` on /diagnostics gets at least one ``size:count`` pair.
        """
        if not self.batches:
            return {}
        return {"batches": str(self.batches), "batched_inferences": str(self.batched), "batch_sizes": self.text()}
