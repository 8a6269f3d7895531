"""The policy server running in LeRobot's own environment (the reference venv: 0.6.1, or 0.4.4's) serves
LeRobot-trained checkpoints (ACT, diffusion) through LeRobot's classes and processors; its chunks equal LeRobot's
in-process prediction (tests/lerobot_training/lerobot_predict.py, same seed for diffusion) within 1e-5. A type that
environment's LeRobot lacks is one line naming the type.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import (
    REF_PYTHON,
    REPO,
    TINY_LEROBOT_ACT,
    TINY_LEROBOT_DIFFUSION,
    ServerProcess,
    lerobot_train,
    needs_reference_server,
    reference_env,
    write_so101_dataset,
)

from lerobot_policy_server.client import PolicyClient
from lerobot_ros.testing import reference_lerobot_version

LEROBOT = ".".join(str(part) for part in reference_lerobot_version())  # the reference venv's release, e.g. 0.6.1
LEROBOT_06 = reference_lerobot_version() >= (0, 6)

pytestmark = [pytest.mark.reference, pytest.mark.slow, needs_reference_server]

TOLERANCE = 1e-5
PREDICT = REPO / "tests" / "lerobot_training" / "lerobot_predict.py"
CAMERA = (32, 48, 3)


def observation_for(info, seed: int) -> dict[str, np.ndarray]:
    """What a robot sends: cameras uint8 (H, W, 3), vectors float32."""
    rng = np.random.default_rng(seed)
    values = {}
    for spec in info.inputs:
        if spec.visual:
            values[spec.key] = rng.integers(0, 256, size=spec.shape, dtype=np.uint8)
        else:
            values[spec.key] = rng.normal(size=spec.shape).astype(np.float32)
    return values


def lerobot_in_process(tmp_path: Path, checkpoint: Path, observation: dict[str, np.ndarray], seed: int) -> np.ndarray:
    """LeRobot's own prediction, with images converted as lerobot-record converts them ((3, H, W) in [0, 1])."""
    converted = {
        key: (value.astype(np.float32) / 255).transpose(2, 0, 1) if value.dtype == np.uint8 else value
        for key, value in observation.items()
    }
    np.savez(tmp_path / "observation.npz", **converted)
    result = subprocess.run(
        [str(REF_PYTHON), str(PREDICT), str(checkpoint), str(tmp_path / "observation.npz"), str(tmp_path / "ref.npz"),
         str(seed)],
        env=reference_env(tmp_path), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    chunk: np.ndarray = np.load(tmp_path / "ref.npz")["chunk"]
    return chunk


@pytest.mark.parametrize(
    ("policy_args", "policy_type", "horizon"),
    [(TINY_LEROBOT_ACT, "act", 15), (TINY_LEROBOT_DIFFUSION, "diffusion", 8)],
)
def test_served_lerobot_checkpoint_predicts_lerobots_chunks(
    tmp_path: Path, policy_args: list[str], policy_type: str, horizon: int
) -> None:
    dataset = write_so101_dataset(tmp_path / "data", camera=CAMERA)
    checkpoint = lerobot_train(tmp_path, dataset, policy_args)
    assert json.loads((checkpoint / "config.json").read_text())["type"] == policy_type
    seed = 7
    server = ServerProcess(
        REF_PYTHON, [str(checkpoint), "--port", "0", "--host", "127.0.0.1", "--seed", str(seed)],
        reference_env(tmp_path), tmp_path / "server.log",
    )  # fmt: skip
    try:
        port = server.wait_serving()
        with PolicyClient(f"grpc://127.0.0.1:{port}", timeout_s=120) as client:
            info = client.info()
            assert (info.policy_type, info.backend, info.name) == (policy_type, "lerobot", checkpoint.name)
            assert info.versions == {}  # versions are the server's log's (below), not every caller's
            assert f"lerobot {LEROBOT}" in server.output()
            assert {s.key: (s.shape, s.dtype) for s in info.inputs} == {
                "observation.state": ((6,), "float32"),
                "observation.environment_state": ((6,), "float32"),
                "observation.images.front": (CAMERA, "uint8"),
            }
            assert (info.action_dim, info.horizon, info.language) == (6, horizon, False)
            observation = observation_for(info, seed=3)
            client.reset()
            reply = client.predict(observation, stamp_ns=1_234_567_890_123, task="pick the block")
    finally:
        server.stop()
    assert reply.stamp_ns == 1_234_567_890_123 and reply.task == "pick the block"
    assert reply.inference_time_s > 0
    expected = lerobot_in_process(tmp_path, checkpoint, observation, seed)
    assert reply.actions.shape == expected.shape == (horizon, 6)
    np.testing.assert_allclose(reply.actions, expected, rtol=TOLERANCE, atol=TOLERANCE)
    if policy_type == "act":
        assert task_seen_by_lerobots_preprocessor(tmp_path, checkpoint, observation) == "pick the block"


TASK_PROBE = """
import json, sys, numpy as np
from lerobot_policy_server.backends import load_backend
backend = load_backend(sys.argv[1], "lerobot")
seen = []
preprocess = backend._pre
backend._pre = lambda batch: (seen.append(batch.get("task")), preprocess(batch))[1]
data = np.load(sys.argv[2])
backend.predict({key: data[key] for key in data.files}, "pick the block")
print("TASK", json.dumps(seen[0]))
"""


def task_seen_by_lerobots_preprocessor(tmp_path: Path, checkpoint: Path, observation: dict[str, np.ndarray]) -> str:
    """The task text as LeRobot's preprocessor receives it (where a VLA's tokenizer step reads it)."""
    np.savez(tmp_path / "raw_observation.npz", **observation)
    result = subprocess.run(
        [str(REF_PYTHON), "-c", TASK_PROBE, str(checkpoint), str(tmp_path / "raw_observation.npz")],
        env=reference_env(tmp_path), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("TASK "))
    return str(json.loads(line[5:]))


@pytest.mark.parametrize(
    ("policy_type", "why"),
    [
        # LeRobot 0.6 knows SmolVLA without transformers and stops while loading it, naming the extra to install.
        ("smolvla", "'transformers' is required" if LEROBOT_06 else "No module named 'transformers'"),
        ("pi0", "No module named 'transformers'"),  # its module imports without transformers, its constructor fails
        ("pi05", "No module named 'transformers'"),
        (
            "mystery_vla",
            "Unknown policy name 'mystery_vla'" if LEROBOT_06 else "Policy type 'mystery_vla' is not available",
        ),
    ],
)
def test_a_type_the_servers_lerobot_lacks_is_one_line_naming_it(tmp_path: Path, policy_type: str, why: str) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"type": policy_type}))
    result = subprocess.run(
        [str(REF_PYTHON), "-m", "lerobot_policy_server", str(tmp_path / "ckpt"), "--port", "0"],
        env=reference_env(tmp_path), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    # Only LeRobot's own log lines may come before ours (0.6 logs its device choice while reading a config).
    assert all(line.startswith("WARNING:") for line in lines[:-1]), result.stderr
    last = lines[-1]
    if LEROBOT_06 and policy_type == "smolvla":
        assert last.startswith(f"policy-server: error: LeRobot {LEROBOT} cannot load {tmp_path / 'ckpt'}"), last
        assert why in last and "lerobot[smolvla]" in last, last
        return
    assert last.startswith(f"policy-server: error: policy type {policy_type!r}"), result.stderr
    assert f"not available in LeRobot {LEROBOT} here" in last and why in last
    assert "lerobot>=0.5" in last
