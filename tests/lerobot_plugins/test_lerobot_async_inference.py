"""LeRobot 0.4.4's async inference drives the fake-hardware SO-101 through the robot plugin (`--robot.type=ros`), in
LeRobot's environment (.venv-lerobot-ref with the plugins: scripts/setup.sh --with-lerobot-plugins): LeRobot's own
policy server runs a small ACT checkpoint made here, LeRobot's own robot_client streams the robot's observations to
it and publishes the action chunks it gets back on the robot's command topic."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from plugin_stack import LEROBOT_SCRIPT_MARKS, StampedHistory, arm_contract, launch_fake_follower
from test_camera_core import TOPIC, ImageStream
from test_lerobot_scripts import NAMES, lerobot_env, run_lerobot

from lerobot_contract import load_contract
from lerobot_ros.testing import reference_venv

pytestmark = LEROBOT_SCRIPT_MARKS

IMAGE_H, IMAGE_W = 24, 32  # ImageStream's default size
PAN_STEP_DEG = 15.0  # the policy's target: the follower's start pose with shoulder_pan moved by this much
CHUNK = 10

# An ACT policy whose action head is zero: its normalized output is 0 for any input, so after the postprocessor's
# unnormalization every action is the action mean of the stats saved with it (the target pose). Saved like
# lerobot-train saves a checkpoint: the policy (config.json, model.safetensors) and its pre/post-processors.
MAKE_CHECKPOINT = """
import sys, json
import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors

out, target, h, w, chunk = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
n = len(target)
config = ACTConfig(
    input_features={"observation.state": PolicyFeature(FeatureType.STATE, (n,)),
                    "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, h, w))},
    output_features={"action": PolicyFeature(FeatureType.ACTION, (n,))},
    chunk_size=chunk, n_action_steps=chunk, dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1,
    n_decoder_layers=1, use_vae=False, pretrained_backbone_weights=None, device="cpu", push_to_hub=False,
)
torch.manual_seed(0)
policy = ACTPolicy(config)
with torch.no_grad():
    policy.model.action_head.weight.zero_()
    policy.model.action_head.bias.zero_()
stats = {
    "observation.state": {"mean": torch.tensor(target), "std": torch.full((n,), 10.0)},
    "observation.images.front": {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)},
    "action": {"mean": torch.tensor(target), "std": torch.full((n,), 10.0)},
}
preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats=stats)
policy.save_pretrained(out)
preprocessor.save_pretrained(out)
postprocessor.save_pretrained(out)
print("CHECKPOINT", out)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def camera_contract(tmp_path: Path) -> Path:
    """The SO-101 arm contract with a `front` camera on ImageStream's topic and size (ACT needs an image)."""
    path = arm_contract(tmp_path, ("observation.state", "action", "observation.images.front"))
    data = yaml.safe_load(path.read_text())
    data["features"]["observation.images.front"]["topic"] = TOPIC
    data["features"]["observation.images.front"]["shape"] = [IMAGE_H, IMAGE_W, 3]
    data["features"]["observation.images.front"]["max_age_s"] = 0.5
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def python_module(module: str) -> list[str]:
    return [str(reference_venv() / "bin" / "python"), "-m", module]


def client_args(contract: Path, port: int, checkpoint: Path, connect_timeout_s: float = 60) -> list[str]:
    return ["--robot.type=ros", f"--robot.contract={contract}", f"--robot.connect_timeout_s={connect_timeout_s}",
            f"--server_address=127.0.0.1:{port}", "--policy_type=act", f"--pretrained_name_or_path={checkpoint}",
            "--policy_device=cpu", "--client_device=cpu", f"--actions_per_chunk={CHUNK}", "--chunk_size_threshold=0.5",
            "--fps=30", "--task=reach"]  # fmt: skip


def test_robot_client_drives_the_follower_with_lerobots_policy_server(processes, ros_node, tmp_path) -> None:
    from sensor_msgs.msg import JointState

    launch_fake_follower(processes, tmp_path)
    contract = camera_contract(tmp_path)
    units = load_contract(contract).features["action"].joint_units()
    states = StampedHistory(ros_node, JointState, "/follower/joint_states")
    deadline = time.monotonic() + 120
    while not states.stamps():
        assert time.monotonic() < deadline, "the fake follower published no joint state within 120 s"
        time.sleep(0.1)
    start_deg = np.asarray(units.apply(np.array(states.newest_at_or_before(2**62).position)[None, :]))[0]
    target = start_deg.copy()
    target[0] += -PAN_STEP_DEG if target[0] > 0 else PAN_STEP_DEG

    checkpoint = tmp_path / "act_checkpoint"
    run_lerobot("python", ["-c", MAKE_CHECKPOINT, str(checkpoint), json.dumps([float(x) for x in target]),
                           str(IMAGE_H), str(IMAGE_W), str(CHUNK)], tmp_path)  # fmt: skip
    assert (checkpoint / "model.safetensors").is_file() and (checkpoint / "policy_postprocessor.json").is_file()

    # faulthandler: a client that does not stop is made to print every thread's stack (SIGABRT) for the report.
    env = {**lerobot_env(tmp_path), "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    port = free_port()
    # LeRobot's async inference writes logs/ into its working directory: the test's folder.
    server = processes.start([*python_module("lerobot.async_inference.policy_server"), "--host=127.0.0.1",
                              f"--port={port}"], env=env, cwd=str(tmp_path), name="policy_server")  # fmt: skip
    server.wait_for_output(r"PolicyServer started on 127\.0\.0\.1", timeout=120)

    camera = ImageStream(ros_node, IMAGE_W, IMAGE_H)
    commands = StampedHistory(ros_node, JointState, "/follower/joint_commands")
    try:
        client = processes.start([*python_module("lerobot.async_inference.robot_client"),
                                  *client_args(contract, port, checkpoint)], env=env, cwd=str(tmp_path),
                                 name="robot_client")  # fmt: skip
        # The client connected the robot, sent the policy instructions, and the server loaded the checkpoint.
        client.wait_for_output(r"Robot connected and ready", timeout=180)
        server.wait_for_output(r"Receiving policy instructions .*Policy type: act", timeout=60)
        server.wait_for_output(r"Time taken to put policy on cpu", timeout=180)
        # Observations arrived and action chunks were computed for them.
        server.wait_for_output(r"Running inference for observation #\d+", timeout=120)
        server.wait_for_output(r"Action chunk #\d+ generated", timeout=120)

        # The chunk's actions reach the robot's command topic (in ROS units) and the follower goes there.
        deadline = time.monotonic() + 180
        while True:
            pan = float(np.degrees(states.newest_at_or_before(2**62).position[0]))
            if len(commands.messages) >= 2 * CHUNK and abs(pan - target[0]) < 2.0:
                break
            assert client.returncode is None, f"robot_client exited:\n{client.output()[-6000:]}"
            assert time.monotonic() < deadline, (
                f"{len(commands.messages)} commands, follower at {pan:.1f} deg, target {target[0]:.1f} deg;\n"
                f"client:\n{client.output()[-3000:]}\nserver:\n{server.output()[-3000:]}"
            )
            time.sleep(0.1)
        sent = np.array([m.position for _, m in commands.messages])
        assert [m.name for _, m in commands.messages[:1]] == [[n.removesuffix(".pos") for n in NAMES]]
        np.testing.assert_allclose(np.asarray(units.apply(sent)), np.tile(target, (len(sent), 1)), atol=1e-3)
        # More than one chunk: the client asked again when its queue ran low (chunk_size_threshold).
        assert len(sent) > CHUNK

        # Ctrl-C stops the client: it disconnects the robot (its command publisher leaves the graph).
        client.send_signal(signal.SIGINT)
        client.wait_for_output(r"disconnected \(left the ROS graph\)", timeout=60)
        deadline = time.monotonic() + 30
        while ros_node.count_publishers("/follower/joint_commands") > 0:
            assert time.monotonic() < deadline, "the client's command publisher is still in the ROS graph"
            time.sleep(0.1)
        stop_robot_client(client)
    finally:
        camera.stop()
    server.send_signal(signal.SIGINT)
    server.wait(timeout=60)
    assert server.returncode is not None


def stop_robot_client(client) -> None:
    """Wait for robot_client to exit after its Ctrl-C; a second Ctrl-C where LeRobot's own shutdown hangs.

    LeRobot 0.4.4's robot_client runs its gRPC calls on the main thread; a Ctrl-C landing inside one (sending an
    observation) can leave a grpcio lock held (grpc/grpc#19973), and the client's final join of its action
    receiver thread (no timeout) then waits forever, after the robot was disconnected. The second Ctrl-C ends
    that join, as a user would. Any other hang fails with every thread's stack (faulthandler, SIGABRT)."""
    try:
        client.wait(timeout=60)
    except subprocess.TimeoutExpired:
        client.send_signal(signal.SIGINT)
        try:
            client.wait(timeout=30)
        except subprocess.TimeoutExpired:
            client.send_signal(signal.SIGABRT)
            client.wait(timeout=30)
            pytest.fail(f"robot_client did not stop after two Ctrl-C; its threads:\n{client.output()[-8000:]}")
        assert "_wait_for_tstate_lock" in client.output(), client.output()[-3000:]  # ended in the receiver's join
        warnings.warn("robot_client needed a second Ctrl-C (LeRobot's shutdown hang, grpc/grpc#19973)", stacklevel=2)
        return
    assert "Client stopped" in client.output(), client.output()[-3000:]


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stdout + result.stderr).strip().splitlines()[-1]


def run_client(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*python_module("lerobot.async_inference.robot_client"), *args], env=lerobot_env(tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_robot_client_without_the_robot_ends_in_one_line(ros_domain, tmp_path) -> None:
    """No follower running: robot_client ends, before it contacts any server, with the plugin's line naming the
    silent topic (after LeRobot's traceback)."""
    contract = arm_contract(tmp_path)
    result = run_client(client_args(contract, free_port(), tmp_path, connect_timeout_s=2), tmp_path)
    assert result.returncode != 0
    assert last_line(result).startswith("lerobot_robot_ros.link.RosLinkError: no aligned frame within 2 s: no message "
                                        "on /follower/joint_states (observation.state)"), last_line(result)  # fmt: skip


def test_robot_client_with_a_bad_contract_ends_in_one_line(ros_domain, tmp_path) -> None:
    """A contract without robot_type: LeRobot's robot factory wraps the plugin's error in one line that still names
    the file and the key."""
    contract = tmp_path / "bad.yaml"
    contract.write_text("fps: 30\nfeatures:\n  action: {topic: /x, type: sensor_msgs/msg/JointState}\n")
    result = run_client(client_args(contract, free_port(), tmp_path, connect_timeout_s=2), tmp_path)
    assert result.returncode != 0
    line = last_line(result)
    assert line.startswith("ValueError: Error creating robot with config RosRobotConfig("), line
    assert line.endswith(f"contract {contract}: robot_type: missing"), line
