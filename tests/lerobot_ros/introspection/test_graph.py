"""CliNode.discover's settle check on a stand-in for the node's graph queries (no DDS)."""

from __future__ import annotations

from types import SimpleNamespace

from lerobot_ros.introspection.graph import UNKNOWN_NODE_NAME, CliNode


def endpoint(node_name: str) -> SimpleNamespace:
    return SimpleNamespace(node_name=node_name)


def cli_over(publishers: dict[str, list[str]], subscriptions: dict[str, list[str]]) -> CliNode:
    """A CliNode whose node answers graph queries from these topic -> endpoint node names tables."""
    cli = CliNode.__new__(CliNode)  # no rclpy: only the graph queries are exercised
    topics = sorted({*publishers, *subscriptions})
    cli.node = SimpleNamespace(
        get_topic_names_and_types=lambda: [(t, ["std_msgs/msg/String"]) for t in topics],
        get_publishers_info_by_topic=lambda t: [endpoint(n) for n in publishers.get(t, [])],
        get_subscriptions_info_by_topic=lambda t: [endpoint(n) for n in subscriptions.get(t, [])],
    )
    return cli


def test_a_graph_whose_endpoints_all_have_nodes_is_settled():
    assert not cli_over({"/chatter": ["talker"]}, {"/chatter": ["listener"]}).has_endpoints_of_unknown_nodes()
    assert not cli_over({}, {}).has_endpoints_of_unknown_nodes()


def test_an_endpoint_announced_before_its_node_is_not_settled():
    assert cli_over({"/chatter": ["talker", UNKNOWN_NODE_NAME]}, {}).has_endpoints_of_unknown_nodes()
    assert cli_over({"/chatter": ["talker"]}, {"/rosout": [UNKNOWN_NODE_NAME]}).has_endpoints_of_unknown_nodes()
