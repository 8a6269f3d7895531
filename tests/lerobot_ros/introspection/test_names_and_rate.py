"""Pure parts of the introspection commands: hidden-name rules, node names, rate statistics."""

from __future__ import annotations

import pytest

from lerobot_ros.introspection.names import (
    cli_node_name,
    fully_qualified_node_name,
    is_hidden_name,
    split_node_name,
)
from lerobot_ros.introspection.rate import RateMeter


@pytest.mark.parametrize(
    ("name", "hidden"),
    [
        ("/x/chatter", False),
        ("/x/_internal", True),
        ("/arm/_action/feedback", True),
        ("/_lerobot_ros_cli_12", True),
        ("/rosout", False),
        ("/x/chatter_", False),
    ],
)
def test_hidden_names_have_a_token_starting_with_underscore(name, hidden):
    assert is_hidden_name(name) is hidden


def test_cli_node_is_hidden():
    assert cli_node_name(42) == "_lerobot_ros_cli_42"
    assert is_hidden_name(fully_qualified_node_name("/", cli_node_name(42)))


def test_node_names_split_and_join():
    assert fully_qualified_node_name("/", "talker") == "/talker"
    assert fully_qualified_node_name("/x/y", "talker") == "/x/y/talker"
    assert split_node_name("/x/y/talker") == ("/x/y", "talker")
    assert split_node_name("/talker") == ("/", "talker")
    assert split_node_name("talker") == ("/", "talker")


def test_rate_meter_statistics_and_report():
    meter = RateMeter()
    assert meter.stats() is None
    for arrival_ms in (0, 100, 200, 400):
        meter.add(arrival_ms * 1_000_000)
    stats = meter.stats()
    assert stats is not None
    assert stats.window == 3
    assert stats.rate_hz == pytest.approx(1 / (0.4 / 3))
    assert (stats.min_s, stats.max_s) == (pytest.approx(0.1), pytest.approx(0.2))
    assert stats.std_dev_s == pytest.approx(0.04714045, rel=1e-6)
    assert stats.report() == "average rate: 7.500\n\tmin: 0.100s max: 0.200s std dev: 0.04714s window: 3"


def test_rate_meter_window_keeps_only_recent_intervals():
    meter = RateMeter(window=2)
    for arrival_ms in (0, 500, 600, 700):
        meter.add(arrival_ms * 1_000_000)
    stats = meter.stats()
    assert stats is not None
    assert stats.window == 2
    assert stats.rate_hz == pytest.approx(10.0)
    assert meter.messages == 4


def test_rate_meter_rejects_bad_input():
    with pytest.raises(ValueError, match="window must be >= 1"):
        RateMeter(window=0)
    meter = RateMeter()
    meter.add(10)
    with pytest.raises(ValueError, match="must not go back"):
        meter.add(5)
