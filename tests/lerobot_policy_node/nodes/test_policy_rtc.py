"""blend rtc in the policy node, as a process: each chunk starts with the steps of the previous one that ran during
its inference; a policy that cannot inpaint is refused at configure with one line."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from policy_outputs import PolicyOutputProbe

from lerobot_contract.time import NS
from lerobot_ros.testing import venv_script
from lerobot_training.checkpoint import save_policy
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.act import ACTConfig, ACTPolicy
from lerobot_training.policies.diffusion import DiffusionConfig, DiffusionPolicy

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
NAMES = tuple(f"{j}.pos" for j in JOINTS)


def contract() -> dict:
    vector = {"type": "sensor_msgs/msg/JointState", "joints": JOINTS, "names": list(NAMES), "units": "rad_to_deg"}
    state = {**vector, "topic": "/follower/joint_states", "max_age_s": 1.0}
    return {"robot_type": "so101_follower", "fps": 30, "features": {
        "observation.state": state, "observation.environment_state": state,
        "action": {**vector, "topic": "/follower/joint_commands"}}}  # fmt: skip


def checkpoint(tmp_path, kind: str) -> str:
    torch.manual_seed(0)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (6,), NAMES),
              "observation.environment_state": PolicyFeature(FeatureType.ENV, (6,))}  # fmt: skip
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,), NAMES)}
    span = {"min": -torch.ones(6) * 90, "max": torch.ones(6) * 90, "mean": torch.zeros(6), "std": torch.ones(6) * 30}
    stats = {"observation.state": span, "observation.environment_state": span, "action": span}
    if kind == "act":
        config = ACTConfig(input_features=inputs, output_features=outputs, chunk_size=15, n_action_steps=15,
                           dim_model=16, n_heads=2, dim_feedforward=32, n_encoder_layers=1, n_decoder_layers=1,
                           use_vae=False)  # fmt: skip
        policy = ACTPolicy(config, stats)
    else:
        # A 2.1 s chunk (64 steps): the overlap the rtc test checks needs the next observation taken while the
        # previous chunk still runs, i.e. an inference shorter than a chunk; with 16 steps (0.53 s) a -m ros run
        # with 4 busy loops had none in 40 chunks.
        config = DiffusionConfig(input_features=inputs, output_features=outputs, n_obs_steps=1, horizon=64,
                                 n_action_steps=32, down_dims=(16, 32), n_groups=4, kernel_size=3,
                                 diffusion_step_embed_dim=16, num_inference_steps=4)  # fmt: skip
        policy = DiffusionPolicy(config, stats)
    directory = tmp_path / kind / "pretrained_model"
    save_policy(directory, policy, fps=30, contract=contract())
    return str(directory)


class StateProbe(PolicyOutputProbe):
    def __init__(self, node) -> None:
        from sensor_msgs.msg import JointState

        super().__init__(node)
        self.states = node.create_publisher(JointState, "/follower/joint_states", 10)
        node.create_timer(0.02, self._publish)

    def _publish(self) -> None:
        from sensor_msgs.msg import JointState

        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name, msg.position = JOINTS, [0.1] * 6
        self.states.publish(msg)


def start_policy(processes, checkpoint_dir: str):
    argv = [venv_script("policy_node"), "--ros-args", "-p", f"checkpoint:={checkpoint_dir}", "-p", "blend:=rtc",
            "-p", "max_observation_age:=1.0"]  # fmt: skip
    return processes.start(argv, name="policy")


def test_rtc_with_a_policy_that_cannot_inpaint_fails_configure_in_one_line(tmp_path, processes, ros_node):
    probe = StateProbe(ros_node)
    policy = start_policy(processes, checkpoint(tmp_path, "act"))
    policy.wait_for_output(r"blend rtc needs a policy that can inpaint its chunk \(diffusion\); .* cannot")
    assert "blend rtc" in probe.status(lambda s: s.state == "error").message


def _overlapping_pairs_checked(chunks) -> int:
    """Assert step 0 of every chunk that starts inside the previous one equals the previous one there; count them."""
    checked = 0
    for old, new in itertools.pairwise(chunks):
        period = old.period.sec * NS + old.period.nanosec
        old_start = old.header.stamp.sec * NS + old.header.stamp.nanosec
        new_start = new.header.stamp.sec * NS + new.header.stamp.nanosec
        old_values = np.asarray(old.data).reshape(old.horizon, -1)
        old_times = old_start + np.arange(old.horizon) * period
        if new_start > old_times[-1]:
            continue  # the previous chunk ran out before this observation (a slow inference): nothing to continue
        expected = [np.interp(new_start, old_times, old_values[:, j]) for j in range(old_values.shape[1])]
        # The untrained model's chunks are noise: only the prefix handed over makes step 0 agree.
        assert np.asarray(new.data).reshape(new.horizon, -1)[0] == pytest.approx(expected, abs=1e-4)
        checked += 1
    return checked


def test_each_chunk_starts_where_the_previous_one_is_at_its_observation(tmp_path, processes, ros_node):
    probe = StateProbe(ros_node)
    start_policy(processes, checkpoint(tmp_path, "diffusion"))
    # Under load an inference can outlast the previous chunk (2.1 s): such a pair has no overlap to check, so
    # wait for chunks until two pairs overlapped (every overlapping pair is checked on the way).
    for published in range(4, 41, 4):
        probe.status(lambda s, n=published: s.chunks_published >= n)
        with probe.lock:
            chunks = list(probe.chunks)
        if _overlapping_pairs_checked(chunks) >= 2:
            return
    raise AssertionError(f"fewer than 2 of {len(chunks)} chunks started inside the previous one")
