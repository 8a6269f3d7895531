"""The policy node with a relative-action checkpoint (issue #19 item 1), in-process: every published chunk is the
model's offsets plus the state of the observation the chunk was computed from, even when a newer state has
arrived while the inference ran."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
import yaml
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

JOINTS = ["a", "b", "gripper"]
ENV = ["x", "y"]


@pytest.fixture
def context(ros_domain):
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=ros_domain)
    yield ctx
    ctx.try_shutdown()


def relative_checkpoint(tmp_path):
    from lerobot_training.checkpoint import save_policy
    from lerobot_training.features import FeatureType, PolicyFeature
    from lerobot_training.policies.act import ACTConfig, ACTPolicy
    from lerobot_training.relative_actions import RelativeActions

    torch.manual_seed(0)
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (3,), tuple(JOINTS)),
        "observation.environment_state": PolicyFeature(FeatureType.ENV, (2,), tuple(ENV)),
    }
    config = ACTConfig(
        input_features=inputs, output_features={"action": PolicyFeature(FeatureType.ACTION, (3,), tuple(JOINTS))},
        chunk_size=10, n_action_steps=10, dim_model=16, n_heads=2, dim_feedforward=32, n_encoder_layers=1,
        n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=4, use_vae=False,
    )  # fmt: skip
    stats = {
        "observation.state": {"mean": torch.zeros(3), "std": torch.ones(3)},
        "observation.environment_state": {"mean": torch.zeros(2), "std": torch.ones(2)},
        "action": {"mean": torch.zeros(3), "std": torch.full((3,), 0.1)},
    }
    policy = ACTPolicy(config, stats)
    policy.relative_actions = RelativeActions.choose(JOINTS, JOINTS)  # a and b; the gripper stays absolute
    directory = tmp_path / "ckpt"
    save_policy(directory, policy, fps=30)
    feature = {"type": "sensor_msgs/msg/JointState", "max_age_s": 1.0}
    contract = {
        "robot_type": "x", "fps": 30, "stamp": "header", "sync_tolerance_s": 0.5,
        "features": {
            "observation.state": {**feature, "topic": "/r/js", "joints": JOINTS, "names": JOINTS},
            "observation.environment_state": {**feature, "topic": "/r/env", "joints": ENV, "names": ENV},
            "action": {**feature, "topic": "/r/cmd", "joints": JOINTS, "names": JOINTS},
        },
    }  # fmt: skip
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(contract))
    return directory, tmp_path / "c.yaml"


def test_chunks_use_the_state_of_their_observation_not_the_state_at_arrival(context, tmp_path):
    from rclpy.executors import MultiThreadedExecutor
    from sensor_msgs.msg import JointState

    from lerobot_policy_node.nodes.policy_node import PolicyNode

    directory, contract = relative_checkpoint(tmp_path)
    overrides = [
        Parameter("autostart", value=False),
        Parameter("checkpoint", value=str(directory)),
        Parameter("contract", value=str(contract)),
    ]
    node = PolicyNode(context=context, parameter_overrides=overrides)
    published: list = []
    node._chunk_pub.publish = published.append
    helper = rclpy_node(context)
    state_pub = helper.create_publisher(JointState, "/r/js", 10)
    env_pub = helper.create_publisher(JointState, "/r/env", 10)
    seen = threading.Event()
    later_state = [50.0, -50.0, 0.5]

    def on_state(msg) -> None:
        if list(msg.position) == later_state:
            seen.set()

    helper.create_subscription(JointState, "/r/js", on_state, 10)
    executor = MultiThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(helper)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    def send(state) -> None:
        stamp = helper.get_clock().now().to_msg()
        for pub, names, values in ((state_pub, JOINTS, state), (env_pub, ENV, [0.2, -0.1])):
            msg = JointState(name=names, position=[float(v) for v in values])
            msg.header.stamp = stamp
            pub.publish(msg)

    observed: list[dict] = []
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        checkpoint_policy = node._policy
        assert checkpoint_policy.relative_joints == ("a", "b")
        original = checkpoint_policy.predict_chunk

        def predict_while_the_robot_moves(observation):
            observed.append({k: np.array(v) for k, v in observation.items() if k.startswith("observation.")})
            observed[-1]["timestamp"] = observation["timestamp"]
            if len(observed) <= 3:  # a newer state arrives while this inference runs (the first is the warm-up)
                seen.clear()
                send(later_state)
                seen.wait(5.0)
                time.sleep(0.05)
            return original(observation)

        checkpoint_policy.predict_chunk = predict_while_the_robot_moves
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(published) < 3:
            send([1.0, 2.0, 0.25])
            time.sleep(0.03)
        assert len(published) >= 3, f"{len(published)} chunks published; status: {node._message}"
    finally:
        node.trigger_deactivate()
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5)
        node.destroy_node()
        helper.destroy_node()
    model = checkpoint_policy._policy
    checked = 0
    for msg in published[:2]:  # chunks whose inference saw the later state arrive
        chunk = np.asarray(msg.data, dtype=np.float64).reshape(msg.horizon, 3)
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        observation = next(o for o in observed if abs(o["timestamp"] - stamp) < 1e-6)
        state = observation["observation.state"]
        inputs = {k: v for k, v in observation.items() if k != "timestamp"}
        with torch.inference_mode():
            offsets = model.predict_chunk_batch(model.prepare_observation(inputs))[0].numpy()
        assert np.allclose(chunk[:, :2], offsets[:, :2] + state[:2], atol=1e-4)
        assert np.allclose(chunk[:, 2], offsets[:, 2], atol=1e-4)  # the gripper stays absolute
        if state.tolist() != later_state:
            checked += 1
            assert not np.allclose(chunk[:, :2], offsets[:, :2] + later_state[:2], atol=1.0)
    assert checked >= 1


def rclpy_node(context):
    from rclpy.node import Node

    return Node("relative_actions_probe", context=context)
