"""`lerobot-ros node ...` run as a subprocess against a live graph in the test's own domain."""

from __future__ import annotations

import re
import subprocess

import pytest

from lerobot_ros.introspection.names import fully_qualified_node_name
from lerobot_ros.testing import ManagedProcess

TALKER_NODE = "/x/demo_talker"


def graph_report(result: subprocess.CompletedProcess[str], ros_node, talker: ManagedProcess) -> str:
    """What the CLI printed next to what the test's own node sees and the talker's state, for a failure message."""
    nodes = sorted(fully_qualified_node_name(ns, name) for name, ns in ros_node.get_node_names_and_namespaces())
    state = "running" if talker.returncode() is None else f"exited with {talker.returncode()}"
    return (
        f"CLI exit {result.returncode}, stdout {result.stdout!r}, stderr {result.stderr[-2000:]!r}; "
        f"the test's node sees {nodes}; talker {state}, output: {talker.output()[-2000:]!r}"
    )


@pytest.mark.ros
def test_list_shows_nodes_and_hides_the_cli_own_node(talker_process, cli, ros_node):
    expected = {TALKER_NODE, ros_node.get_fully_qualified_name()}
    shown = cli.run_until(lambda out: expected <= set(out.splitlines()), "node", "list", timeout=60.0)
    assert shown.returncode == 0, shown.stderr
    assert expected <= set(shown.stdout.splitlines()), graph_report(shown, ros_node, talker_process)
    assert "_lerobot_ros_cli" not in shown.stdout

    everything = cli.run("node", "list", "-a")
    assert everything.returncode == 0, everything.stderr
    own = re.findall(r"^/_lerobot_ros_cli_\d+$", everything.stdout, flags=re.MULTILINE)
    assert len(own) == 1, everything.stdout


@pytest.mark.ros
def test_info_lists_publishers_and_services(talker, cli):
    result = cli.run("node", "info", "/x/demo_talker")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "/x/demo_talker"
    publishers = lines[lines.index("  Publishers:") + 1 : lines.index("  Service Servers:")]
    assert "    /x/chatter: std_msgs/msg/String" in publishers
    assert "    /x/demo_talker/get_parameters: rcl_interfaces/srv/GetParameters" in lines
    assert lines[-4:] == ["  Action Servers:", "", "  Action Clients:", ""]


@pytest.mark.ros
def test_info_of_a_missing_node_says_how_to_find_nodes(cli):
    result = cli.run("node", "info", "/x/nobody", "--timeout", "1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "lerobot-ros node: error: node '/x/nobody' not found within 1 s; "
        "see the running nodes with `lerobot-ros node list`, or raise --timeout"
    )
