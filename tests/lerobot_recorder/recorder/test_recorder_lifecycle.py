"""The recorder's lifecycle transitions in-process (no other processes): configure, activate, cleanup."""

from __future__ import annotations

from pathlib import Path

import pytest
from recorder_helpers import CONTRACT

pytestmark = pytest.mark.ros


def make_node(ros_domain: int, root: Path, **params: object):
    import rclpy
    from rclpy.parameter import Parameter

    from lerobot_recorder.nodes.recorder import Recorder

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain)
    values = {"contract": str(CONTRACT), "root": str(root), "task": "t", "startup_timeout_s": 0.0, **params}
    overrides = [Parameter(k, value=v) for k, v in values.items()]
    return Recorder(context=context, parameter_overrides=overrides), context


def test_transitions_create_and_release_the_dataset(ros_domain: int, tmp_path: Path) -> None:
    from rclpy.lifecycle import TransitionCallbackReturn

    root = tmp_path / "ds"
    node, context = make_node(ros_domain, root, start_session=False)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert (root / "meta" / "info.json").is_file()
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        # The recorder let go of the dataset and, with no episode saved, left no folder (one of meta/ alone is no
        # dataset: `dataset validate` refuses it).
        assert not root.exists()
        # a root without a committed episode is no dataset yet: configuring again takes it over (issue 18 #4);
        # a root with a saved episode and resume false is refused (test_recorder_existing_root)
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    finally:
        node.release()
        node.destroy_node()
        context.shutdown()


def test_configure_fails_on_bad_parameters(ros_domain: int, tmp_path: Path) -> None:
    from rclpy.lifecycle import TransitionCallbackReturn

    node, context = make_node(ros_domain, tmp_path / "ds", resume=True)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert not (tmp_path / "ds").exists()
    finally:
        node.destroy_node()
        context.shutdown()


def test_a_configure_failing_after_the_dataset_opened_lets_go_of_it(ros_domain: int, tmp_path: Path) -> None:
    """The subscriptions come last: a contract type with no Python module fails there, after the writer opened."""
    from rclpy.lifecycle import TransitionCallbackReturn

    contract = tmp_path / "tf.yaml"
    contract.write_text(
        "robot_type: t\nfps: 10\nstamp: receive\nfeatures:\n  observation.state:\n    topic: /tf_like\n"
        "    type: tf2_msgs/msg/TFMessage\n    field: transforms\n    names: [x]\n"
    )
    root = tmp_path / "ds"
    node, context = make_node(ros_domain, root, contract=str(contract), start_session=False)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        # It got as far as opening the dataset (the status names the subscription's type), then let go of it
        # and, with nothing saved, left no folder.
        assert not root.exists()
        assert node._session.status().message.startswith("unknown message type 'tf2_msgs/msg/TFMessage'")
    finally:
        node.release()
        node.destroy_node()
        context.shutdown()
