"""Helpers of the tests that run the policy server in LeRobot's reference venv (.venv-lerobot-ref: 0.6.1).

The server is installed there with grpcio only (scripts/setup.sh --with-lerobot-reference); LeRobot's
training needs the extra packages on PYTHONPATH (act-extras), as in tests/lerobot_training.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lerobot_dataset import DatasetWriter, FeatureSpec
from lerobot_ros import testing
from lerobot_ros.testing import reference_env, reference_has, reference_python

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REF_PYTHON = reference_python()


def _has_server() -> bool:
    if not reference_has("draccus"):
        return False
    probe = subprocess.run(
        [str(REF_PYTHON), "-c", "import grpc, lerobot, lerobot_policy_server.backends"],
        env=reference_env(None),
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


needs_reference_server = pytest.mark.skipif(
    not _has_server(),
    reason="needs .venv-lerobot-ref with the ACT training extras and the policy server "
    "(scripts/setup.sh --with-lerobot-reference)",
)

TINY_LEROBOT_ACT = [
    "--policy.type=act", "--policy.pretrained_backbone_weights=null", "--policy.dim_model=64", "--policy.n_heads=4",
    "--policy.dim_feedforward=128", "--policy.n_encoder_layers=2", "--policy.n_vae_encoder_layers=1",
    "--policy.chunk_size=15", "--policy.n_action_steps=15", "--policy.latent_dim=8",
]  # fmt: skip
# LeRobot 0.6 changed diffusion's defaults (ImageNet ResNet-18 weights, batch norm): 0.4.4's are given.
TINY_LEROBOT_DIFFUSION = [
    "--policy.type=diffusion", "--policy.pretrained_backbone_weights=null", "--policy.use_group_norm=true",
    "--policy.down_dims=[16, 32]", "--policy.n_groups=4", "--policy.kernel_size=3",
    "--policy.diffusion_step_embed_dim=16", "--policy.spatial_softmax_num_keypoints=4", "--policy.horizon=16",
    "--policy.n_action_steps=8", "--policy.num_train_timesteps=20",
]  # fmt: skip

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
STATE_NAMES = [f"{j}.pos" for j in JOINTS]
ENV_NAMES = ["block.x", "block.y", "block.z", "goal.x", "goal.y", "goal.z"]


def write_so101_dataset(root: Path, *, camera: tuple[int, int, int] | None = None, fps: int = 30) -> Path:
    """2 episodes of an SO-101 (degrees, gripper 0..100) with a 6-value environment state; optional camera.

    The action stays within a few degrees of the state, so a barely trained policy stays near the middle of
    the joints' ranges.
    """
    features: dict[str, FeatureSpec] = {
        "observation.state": FeatureSpec("float32", (6,), STATE_NAMES),
        "observation.environment_state": FeatureSpec("float32", (6,), ENV_NAMES),
        "action": FeatureSpec("float32", (6,), STATE_NAMES),
    }
    if camera is not None:
        features["observation.images.front"] = FeatureSpec("video", camera)
    with DatasetWriter.create(
        root, repo_id="local/so101", fps=fps, features=features, video_codec="h264", robot_type="so101_follower"
    ) as writer:
        for episode in range(2):
            writer.start_episode("pick the block")
            for frame in range(12):
                phase = frame / 12 * 2 * np.pi + episode
                state = np.array([5 * np.sin(phase + j) for j in range(6)], dtype=np.float32)
                state[5] = 30 + 10 * np.sin(phase)
                values: dict[str, Any] = {
                    "observation.state": state,
                    "observation.environment_state": np.array(
                        [0.2, 0.05 * episode, 0.01, 0.25, -0.1, 0.01], dtype=np.float32
                    )
                    + 0.01 * np.float32(np.sin(phase)),
                    "action": state + np.float32(2 * np.cos(phase)),
                }
                if camera is not None:
                    image = np.zeros(camera, dtype=np.uint8)
                    image[:, : int((frame + 1) / 12 * camera[1])] = 60 + 80 * episode
                    values["observation.images.front"] = image
                writer.add_frame(values)
            writer.save_episode()
    return root


def lerobot_train(tmp_path: Path, dataset: Path, policy_args: list[str]) -> Path:
    """Train 2 steps with LeRobot's own lerobot-train (CPU) on a `write_so101_dataset` dataset."""
    return testing.lerobot_train(tmp_path, dataset, "local/so101", policy_args)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class ServerProcess:
    """`python -m lerobot_policy_server` in the reference venv (or any python), stopped by `stop`."""

    def __init__(self, python: Path | str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._file = log.open("w")
        self.process = subprocess.Popen(
            [str(python), "-m", "lerobot_policy_server", *args], env=env, stdout=self._file, stderr=subprocess.STDOUT
        )

    def output(self) -> str:
        return self.log.read_text()

    def wait_serving(self, timeout: float = 300.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(r"policy-server: serving .* on [^ ]+:(\d+);", self.output())
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                raise AssertionError(f"the policy server exited ({self.process.returncode}):\n{self.output()[-4000:]}")
            time.sleep(0.1)
        raise AssertionError(f"the policy server did not start within {timeout} s:\n{self.output()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._file.close()
