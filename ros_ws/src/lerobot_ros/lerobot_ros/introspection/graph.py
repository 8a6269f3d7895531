"""The rclpy side of the introspection commands: a hidden CLI node and graph queries on it.

Imported only inside the commands' `run`, so `lerobot-ros --help` does not load rclpy.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import rclpy
from rclpy.context import Context
from rclpy.exceptions import InvalidTopicNameException
from rclpy.executors import ExternalShutdownException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
from rclpy.validate_full_topic_name import validate_full_topic_name

from lerobot_ros.command import CommandError
from lerobot_ros.dds import apply_ros_environment
from lerobot_ros.executors import SingleThreadedExecutor
from lerobot_ros.introspection.names import cli_node_name, is_hidden_name
from lerobot_ros.introspection.settle import GraphSettle
from lerobot_ros.message_conversion import MessageTypeError, import_message_type, message_type_name

T = TypeVar("T")

POLL_INTERVAL_S = 0.05
# With an explicit TYPE, how long to look for the topic in the graph to check that type.
EXPLICIT_TYPE_CHECK_S = 1.0
# rmw's node name for an endpoint whose node announcement (ros_discovery_info) has not arrived yet: the
# endpoint is known, its node is not listed.
UNKNOWN_NODE_NAME = "_NODE_NAME_UNKNOWN_"


class CliNode:
    """A hidden node (`_lerobot_ros_cli_<pid>`) in its own context, for one CLI invocation.

    Applies the stack's ROS environment before initialising rclpy; use as a context manager.
    """

    def __init__(self) -> None:
        apply_ros_environment()
        self.context = Context()
        rclpy.init(context=self.context)
        self.node: Node = rclpy.create_node(
            cli_node_name(os.getpid()), context=self.context, start_parameter_services=False, enable_rosout=False
        )
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def __enter__(self) -> CliNode:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()

    def spin_for(self, seconds: float) -> None:
        """Process callbacks for `seconds`; ExternalShutdownException once rclpy is shut down (SIGINT/SIGTERM)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            self._spin_once(min(remaining, 0.1))

    def spin_until(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Process callbacks until `done()` or `timeout` seconds (None: forever); returns `done()`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            remaining = 0.1 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                break
            self._spin_once(min(remaining, 0.1))
        return done()

    def discover(self, spin_time: float) -> None:
        """Let discovery run at least `spin_time` s, then until the graph has settled (see `settle.GraphSettle`):
        nothing changed for longer than a DDS announcement period, another node seen, every endpoint's node known.
        """
        rule = GraphSettle(min_s=spin_time)
        own = (self.node.get_name(), self.node.get_namespace())
        start = time.monotonic()
        while True:
            nodes = frozenset(self.node.get_node_names_and_namespaces()) - {own}
            endpoints = self.endpoints()
            unknown = any(e[1] == UNKNOWN_NODE_NAME for e in endpoints)
            if rule.observe(
                time.monotonic() - start, (nodes, endpoints), other_nodes=bool(nodes), unknown_nodes=unknown
            ):
                return
            self._spin_once(POLL_INTERVAL_S)

    def endpoints(self) -> frozenset[tuple[str, str, str, str, str]]:
        """Every publisher and subscription in the graph as (topic, node, namespace, type, kind)."""
        out: set[tuple[str, str, str, str, str]] = set()
        for topic, _ in self.node.get_topic_names_and_types():
            for kind, infos in (
                ("pub", self.node.get_publishers_info_by_topic(topic)),
                ("sub", self.node.get_subscriptions_info_by_topic(topic)),
            ):
                out.update((topic, e.node_name, e.node_namespace, e.topic_type, kind) for e in infos)
        return frozenset(out)

    def has_endpoints_of_unknown_nodes(self) -> bool:
        """Whether a publisher or subscription is in the graph before the announcement of its node."""
        for topic, _ in self.node.get_topic_names_and_types():
            endpoints = (
                *self.node.get_publishers_info_by_topic(topic),
                *self.node.get_subscriptions_info_by_topic(topic),
            )
            if any(endpoint.node_name == UNKNOWN_NODE_NAME for endpoint in endpoints):
                return True
        return False

    def poll(self, probe: Callable[[], T | None], timeout: float) -> T | None:
        """Call `probe` until it returns a truthy value or `timeout` seconds pass; returns the last result.

        For graph queries, which the middleware updates without spinning.
        """
        deadline = time.monotonic() + timeout
        while True:
            if not self.context.ok():
                raise ExternalShutdownException()
            result = probe()
            if result or time.monotonic() >= deadline:
                return result
            time.sleep(POLL_INTERVAL_S)

    def _spin_once(self, timeout: float) -> None:
        if not self.context.ok():
            raise ExternalShutdownException()
        self.executor.spin_once(timeout_sec=timeout)

    def expand_topic(self, name: str) -> str:
        """The fully qualified form of a topic name given on the command line (`chatter` -> `/chatter`)."""
        try:
            expanded = expand_topic_name(name, self.node.get_name(), self.node.get_namespace())
            validate_full_topic_name(expanded)
        except (ValueError, InvalidTopicNameException) as err:
            raise CommandError(f"invalid topic name {name!r}: {err}") from None
        return expanded

    def topic_types(self, include_hidden: bool = True) -> dict[str, list[str]]:
        """Topics in the graph and their types, sorted by name."""
        return {
            name: list(types)
            for name, types in sorted(self.node.get_topic_names_and_types())
            if include_hidden or not is_hidden_name(name)
        }

    def wait_for_topic(self, topic: str, timeout: float) -> list[str]:
        """Wait until `topic` is in the graph; returns its types; CommandError after `timeout` s."""
        found = self.poll(lambda: self.topic_types().get(topic), timeout)
        if found is None:
            raise CommandError(
                f"topic {topic!r} not found within {timeout:g} s; check the name with `lerobot-ros topic list`, "
                "start its publisher, or raise --timeout"
            )
        return found


def message_class(type_name: str) -> Any:
    """The message class for a type name, as a CommandError when it cannot be imported."""
    try:
        return import_message_type(type_name)
    except MessageTypeError as err:
        raise CommandError(str(err)) from None


def topic_message_class(cli: CliNode, topic: str, type_name: str | None, timeout: float) -> Any:
    """The message class for `topic`: `type_name` when given, else the graph's type (waiting up to `timeout` s).

    A given type is checked against the graph when the topic is already known there.
    """
    if type_name is None:
        types = cli.wait_for_topic(topic, timeout)
        if len(types) > 1:
            raise CommandError(f"topic {topic!r} has several types ({', '.join(types)}); pass the one to use as TYPE")
        return message_class(types[0])
    cls = message_class(type_name)
    known = cli.poll(lambda: cli.topic_types().get(topic), min(timeout, EXPLICIT_TYPE_CHECK_S))
    if known and message_type_name(cls) not in known:
        raise CommandError(
            f"topic {topic!r} has type {', '.join(known)}, not {message_type_name(cls)}; omit TYPE to use the graph's"
        )
    return cls


def subscription_qos(cli: CliNode, topic: str, args: argparse.Namespace) -> QoSProfile:
    """QoS that receives from the topic's publishers: reliable / transient-local only when all of them are.

    BEST_EFFORT + VOLATILE when no publisher is known yet, since it matches any publisher.
    """
    publishers = cli.node.get_publishers_info_by_topic(topic)
    if args.qos_reliability:
        reliability = QoSReliabilityPolicy.__members__[args.qos_reliability.upper()]
    else:
        all_reliable = bool(publishers) and all(
            p.qos_profile.reliability == QoSReliabilityPolicy.RELIABLE for p in publishers
        )
        reliability = QoSReliabilityPolicy.RELIABLE if all_reliable else QoSReliabilityPolicy.BEST_EFFORT
    if args.qos_durability:
        durability = QoSDurabilityPolicy.__members__[args.qos_durability.upper()]
    else:
        all_latched = bool(publishers) and all(
            p.qos_profile.durability == QoSDurabilityPolicy.TRANSIENT_LOCAL for p in publishers
        )
        durability = QoSDurabilityPolicy.TRANSIENT_LOCAL if all_latched else QoSDurabilityPolicy.VOLATILE
    return QoSProfile(depth=args.qos_depth, reliability=reliability, durability=durability)


def publisher_qos(args: argparse.Namespace) -> QoSProfile:
    """QoS for `topic pub`: RELIABLE + VOLATILE unless the options say otherwise."""
    return QoSProfile(
        depth=args.qos_depth,
        reliability=QoSReliabilityPolicy.__members__[(args.qos_reliability or "reliable").upper()],
        durability=QoSDurabilityPolicy.__members__[(args.qos_durability or "volatile").upper()],
    )
