"""`lerobot-ros node`: list the nodes of the graph and show what one publishes, subscribes and serves.

  lerobot-ros node list
  lerobot-ros node list -a        # also hidden nodes (names starting with `_`, e.g. this CLI's own)
  lerobot-ros node info /follower/arm_driver

Output reads like `ros2 node list` / `ros2 node info`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from lerobot_ros.command import Command, CommandError


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from lerobot_ros.introspection.options import add_spin_time, add_timeout

    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("list", help="list the nodes in the graph")
    p.add_argument("-a", "--all", action="store_true", help="include hidden nodes (names starting with `_`)")
    p.add_argument("-c", "--count-nodes", action="store_true", help="print only the number of nodes")
    add_spin_time(p)

    p = verbs.add_parser("info", help="print a node's publishers, subscribers, services and actions")
    p.add_argument("node", metavar="NODE", help="fully qualified node name, e.g. /follower/arm_driver")
    p.add_argument("--include-hidden", action="store_true", help="include hidden topics and services")
    add_timeout(p, "the node to appear")
    add_spin_time(p)


def _run(args: argparse.Namespace) -> int:
    from rclpy.executors import ExternalShutdownException

    try:
        return _list(args) if args.verb == "list" else _info(args)
    except ExternalShutdownException:
        return 0


def _node_names(node: Any) -> list[tuple[str, str]]:
    """(fully qualified name, bare name) of every node in the graph, sorted."""
    from lerobot_ros.introspection.names import fully_qualified_node_name

    return sorted((fully_qualified_node_name(ns, name), name) for name, ns in node.get_node_names_and_namespaces())


def _list(args: argparse.Namespace) -> int:
    from lerobot_ros.introspection.graph import CliNode

    with CliNode() as cli:
        cli.discover(args.spin_time)
        names = [fq for fq, name in _node_names(cli.node) if args.all or not name.startswith("_")]
    if len(set(names)) < len(names):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        print(
            f"warning: several nodes share the name {', '.join(duplicates)}; this can have unintended side effects",
            file=sys.stderr,
        )
    if args.count_nodes:
        print(len(names))
        return 0
    for name in names:
        print(name)
    return 0


def _info(args: argparse.Namespace) -> int:
    from rclpy._rclpy_pybind11 import NodeNameNonExistentError
    from rclpy.action.graph import get_action_client_names_and_types_by_node, get_action_server_names_and_types_by_node

    from lerobot_ros.introspection.graph import CliNode
    from lerobot_ros.introspection.names import fully_qualified_node_name, is_hidden_name, split_node_name

    namespace, name = split_node_name(args.node)
    target = fully_qualified_node_name(namespace, name)
    started = time.monotonic()
    with CliNode() as cli:
        found = cli.poll(lambda: any(fq == target for fq, _ in _node_names(cli.node)), args.timeout)
        if not found:
            raise CommandError(
                f"node {target!r} not found within {args.timeout:g} s; see the running nodes with "
                "`lerobot-ros node list`, or raise --timeout"
            )
        cli.spin_for(args.spin_time - (time.monotonic() - started))
        node = cli.node
        try:
            sections = [
                ("Subscribers", node.get_subscriber_names_and_types_by_node(name, namespace)),
                ("Publishers", node.get_publisher_names_and_types_by_node(name, namespace)),
                ("Service Servers", node.get_service_names_and_types_by_node(name, namespace)),
                ("Service Clients", node.get_client_names_and_types_by_node(name, namespace)),
                ("Action Servers", get_action_server_names_and_types_by_node(node, name, namespace)),
                ("Action Clients", get_action_client_names_and_types_by_node(node, name, namespace)),
            ]
        except NodeNameNonExistentError:
            raise CommandError(
                f"node {target!r} left the graph while it was being queried; check that it is running"
            ) from None
        duplicates = sum(1 for fq, _ in _node_names(node) if fq == target)
    if duplicates > 1:
        print(f"warning: {duplicates} nodes in the graph are named {target}; showing them merged", file=sys.stderr)
    print(target)
    for title, entries in sections:
        shown = [(n, types) for n, types in sorted(entries) if args.include_hidden or not is_hidden_name(n)]
        print(f"  {title}:")
        # Like `ros2 node info`: one line per entry, an empty line for an empty section.
        print("\n".join(f"    {entry_name}: {', '.join(types)}" for entry_name, types in shown))
    return 0


COMMAND = Command(
    name="node",
    help="list nodes and show their topics, services and actions, like `ros2 node`",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
