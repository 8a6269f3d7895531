"""`lerobot-ros eval --num-envs N`: the same per-seed episodes as the serial evaluation through the sim bridge.

The default run compares a tiny random ACT checkpoint (joints, block/goal positions) over three short episodes:
serial through the lockstep bridge against two in-process envs, episode by episode down to the SHA-256 of every
commanded target and of every observation (camera frames included). The longer checks run with
LEROBOT_ROS_PARALLEL_EVAL=1 (or -m parallel_eval): the same with a camera policy, and the scripted pick-and-place
expert as a chunk policy (episodes succeed, end at different steps, and envs pick up the next seed mid-run) on 1, 2
and 3 envs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from lerobot_eval.vector_evaluation import BatchPolicy
from lerobot_policy_node.core.policies import CheckpointPolicy, InputFeature
from lerobot_ros.vector_env import WORKER_MEMORY_BYTES, MachineLimitError, choose_num_envs, max_envs
from lerobot_sim_bridge.contract_env import SimContractEnv
from lerobot_sim_bridge.errors import InvalidConfigError

REPO = Path(__file__).resolve().parents[2]
CONTRACT_PATH = REPO / "config" / "contracts" / "so101_sim.yaml"
STATE, ENV_STATE, FRONT = "observation.state", "observation.environment_state", "observation.images.front"
LONG = os.environ.get("LEROBOT_ROS_PARALLEL_EVAL") == "1"


def _lerobot_ros() -> str:
    return str(Path(sys.executable).parent / "lerobot-ros")


@pytest.fixture(scope="module")
def contract() -> dict[str, Any]:
    loaded = yaml.safe_load(CONTRACT_PATH.read_text())
    assert isinstance(loaded, dict)
    return loaded


def tiny_act(directory: Path, contract: dict[str, Any], camera: tuple[int, int] | None) -> Path:
    """A random tiny ACT on the sim contract's joints, block/goal positions and a camera of `camera` (H, W)."""
    from lerobot_training.checkpoint import save_policy
    from lerobot_training.features import FeatureType, PolicyFeature
    from lerobot_training.policies.act import ACTConfig, ACTPolicy

    torch.manual_seed(0)
    names = tuple(contract["features"][STATE]["names"])
    inputs = {
        STATE: PolicyFeature(FeatureType.STATE, (6,), names),
        ENV_STATE: PolicyFeature(FeatureType.ENV, (6,), tuple(contract["features"][ENV_STATE]["names"])),
    }
    if camera is not None:
        inputs[FRONT] = PolicyFeature(FeatureType.VISUAL, (3, *camera))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,), names)}
    config = ACTConfig(
        input_features=inputs, output_features=outputs, chunk_size=8, n_action_steps=8, dim_model=32, n_heads=2,
        dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=8,
    )  # fmt: skip
    stats = {
        STATE: {"mean": torch.zeros(6), "std": torch.full((6,), 30.0)},
        ENV_STATE: {"mean": torch.zeros(6), "std": torch.full((6,), 0.2)},
        FRONT: {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)},
        "action": {"mean": torch.full((6,), 10.0), "std": torch.full((6,), 20.0)},
    }
    stats = {k: v for k, v in stats.items() if k in inputs or k == "action"}
    stats = {k: {**v, "min": v["mean"] - 3 * v["std"], "max": v["mean"] + 3 * v["std"]} for k, v in stats.items()}
    save_policy(directory, ACTPolicy(config, stats), fps=30, contract=contract)
    return directory


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, contract: dict[str, Any]) -> Path:
    """The tiny ACT on joints and block/goal positions (no ResNet: chunks in milliseconds)."""
    return tiny_act(tmp_path_factory.mktemp("parallel_eval") / "pretrained_model", contract, None)


def _eval(out: Path, checkpoint: Path, videos: int, num_envs: str | None) -> dict[str, Any]:
    """What `lerobot-ros eval CHECKPOINT --episodes 3 --max-steps 20 --seed 7 [--num-envs N]` runs (in this process,
    in the test's ROS domain)."""
    from lerobot_eval.evaluation import EvalSettings, run_evaluation

    settings = EvalSettings(
        checkpoint=str(checkpoint), contract="", episodes=3, max_steps=20, seed=7, env_id="so101_pick_place",
        cameras="front:320x240", videos=videos, blend="crossfade", threshold=0.5, device="cpu", output_dir=out,
        num_envs=num_envs,
    )  # fmt: skip
    out.mkdir(parents=True)
    return run_evaluation(settings, progress=lambda _line: None)


def _compare_serial_and_two_envs(checkpoint: Path, tmp_path: Path, videos: int) -> None:
    serial = _eval(tmp_path / "serial", checkpoint, videos, None)
    parallel = _eval(tmp_path / "parallel", checkpoint, videos, "2")
    assert parallel["num_envs"] == 2 and parallel["policy_batch_sizes"]["max"] == 2
    assert [e["seed"] for e in serial["per_episode"]] == [7, 8, 9]
    # Same seeds, steps, returns and chunks; the same observations (joints, block/goal, every camera frame, as
    # rendered by the bridge and by the workers) and the same commanded targets, to the last bit.
    assert parallel["per_episode"] == serial["per_episode"]
    for key in ("targets_sha256", "observations_sha256"):  # the episodes differ from each other
        assert len({e[key] for e in serial["per_episode"]}) == 3
    assert parallel["chunks"] == serial["chunks"]
    # (The MP4s themselves are not compared: libx264's threaded encoding differs from run to run.)
    assert len(parallel["videos"]) == len(serial["videos"]) == videos


@pytest.mark.ros
def test_two_envs_give_the_serial_episodes_bit_for_bit(checkpoint: Path, tmp_path: Path, ros_domain: int) -> None:
    _compare_serial_and_two_envs(checkpoint, tmp_path, videos=1)


@pytest.mark.ros
@pytest.mark.parallel_eval
@pytest.mark.skipif(not LONG, reason="about 3 min: LEROBOT_ROS_PARALLEL_EVAL=1 (or -m parallel_eval) runs it")
def test_a_camera_policy_gives_the_serial_episodes_on_two_envs(
    tmp_path: Path, ros_domain: int, contract: dict[str, Any]
) -> None:
    checkpoint = tiny_act(tmp_path / "pretrained_model", contract, (240, 320))
    _compare_serial_and_two_envs(checkpoint, tmp_path, videos=3)


def test_a_checkpoint_chunk_does_not_depend_on_its_batch(tmp_path: Path, contract: dict[str, Any]) -> None:
    policy = CheckpointPolicy(tiny_act(tmp_path / "pretrained_model", contract, (24, 32)))
    rng = np.random.default_rng(0)
    observations = [
        {STATE: rng.normal(0, 30, 6).astype(np.float32), ENV_STATE: rng.normal(0, 0.2, 6).astype(np.float32),
         FRONT: rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)}
        for _ in range(4)
    ]  # fmt: skip
    alone = [policy.predict_chunks([o])[0] for o in observations]
    for size in (2, 4):
        together = policy.predict_chunks(observations[:size])
        assert all(np.array_equal(a, b) for a, b in zip(alone, together, strict=False))
    reordered = policy.predict_chunks([observations[3], observations[0]])
    assert np.array_equal(reordered[0], alone[3]) and np.array_equal(reordered[1], alone[0])
    # On the CPU the node's unbatched predict_chunk is the very same computation.
    assert np.array_equal(policy.predict_chunk(observations[0]), alone[0])


def test_num_envs_beyond_the_machine_is_one_line_naming_the_limit() -> None:
    gib = 1024**3
    assert max_envs(cores=2, memory_bytes=None) == 8
    assert max_envs(cores=2, memory_bytes=2 * WORKER_MEMORY_BYTES + 1) == 2
    with pytest.raises(MachineLimitError) as err:
        choose_num_envs("64", episodes=100, cores=2, memory_bytes=22 * gib)
    message = str(err.value)
    assert "\n" not in message and "--num-envs 64" in message and "at most 8" in message and "2 cores" in message
    with pytest.raises(MachineLimitError, match="at most 2 envs"):
        choose_num_envs("3", episodes=100, cores=16, memory_bytes=2 * WORKER_MEMORY_BYTES)
    with pytest.raises(ValueError, match="must be a number"):
        choose_num_envs("many", episodes=10, cores=2, memory_bytes=None)
    with pytest.raises(ValueError, match=">= 1"):
        choose_num_envs("0", episodes=10, cores=2, memory_bytes=None)
    # auto: one env per core, never more than the episodes or what memory holds
    assert choose_num_envs("auto", episodes=10, cores=2, memory_bytes=None) == 2
    assert choose_num_envs("auto", episodes=1, cores=16, memory_bytes=None) == 1
    assert choose_num_envs("auto", episodes=50, cores=16, memory_bytes=3 * WORKER_MEMORY_BYTES) == 3
    assert choose_num_envs("4", episodes=10, cores=1, memory_bytes=None) == 4


@pytest.mark.ros
def test_the_cli_refuses_more_envs_than_the_machine_holds_in_one_line(ros_env: Any) -> None:
    argv = [_lerobot_ros(), "eval", "scripted", "--episodes", "2", "--num-envs", "100000"]
    result = subprocess.run(argv, env=dict(ros_env), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "--num-envs 100000" in lines[0] and "at most" in lines[0], lines


def test_a_worker_that_cannot_render_ends_the_evaluation_in_one_line(tmp_path: Path) -> None:
    argv = [_lerobot_ros(), "eval", "scripted", "--episodes", "1", "--max-steps", "3", "--num-envs", "1",
            "--output-dir", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "MUJOCO_GL": "nonsense"}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "Received the following error" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("lerobot-ros eval: error: evaluation on 1 envs stopped")
    assert "MUJOCO_GL is 'nonsense'" in result.stderr


def test_the_sim_env_refuses_features_the_bridge_does_not_publish(contract: dict[str, Any]) -> None:
    odd = json.loads(json.dumps(contract))
    odd["features"]["observation.images.front"]["shape"] = [480, 640, 3]
    with pytest.raises(InvalidConfigError, match=r"renders front at 320x240"):
        SimContractEnv("so101_pick_place", odd, 30.0, "front:320x240")
    with pytest.raises(InvalidConfigError, match=r"not a camera the sim renders"):
        SimContractEnv("so101_pick_place", contract, 30.0, "")
    odd = json.loads(json.dumps(contract))
    odd["features"][STATE]["topic"] = "/follower/other_states"
    with pytest.raises(InvalidConfigError, match=r"not published by the sim bridge"):
        SimContractEnv("so101_pick_place", odd, 30.0, "front:320x240")


def test_a_policy_server_is_not_shared_between_envs() -> None:
    from lerobot_policy_node.core.policies import RemotePolicy

    remote = RemotePolicy.__new__(RemotePolicy)
    remote.name = "grpc://localhost:50051"
    with pytest.raises(ValueError, match="without --num-envs"):
        BatchPolicy(remote, 2)


class ExpertChunkPolicy:
    """The scripted pick-and-place expert behind the ChunkPolicy interface (one-step chunks from the contract's
    joints and block/goal positions), so that evaluated episodes succeed and end at different steps."""

    name = "expert"
    action_dim = 6
    horizon = 1
    fps = 30.0

    def __init__(self, contract: Mapping[str, Any]) -> None:
        from lerobot_contract import Contract

        parsed = Contract.from_dict(dict(contract))
        self._state = parsed.features[STATE].joint_units()
        self._action = parsed.features["action"].joint_units()
        self.action_names = tuple(parsed.features["action"].dataset_names or ())
        self.inputs = (InputFeature(STATE, (6,), False), InputFeature(ENV_STATE, (6,), False))
        self._expert: Any = None

    def reset(self) -> None:
        if self._expert is not None:
            self._expert.reset()

    def predict_chunk(self, observation: Mapping[str, Any]) -> np.ndarray:
        from lerobot_sim_bridge.adapters.base import ObjectPose
        from lerobot_sim_bridge.experts.base import make_expert

        if self._expert is None:
            self._expert = make_expert("so101_pick_place", hold_ticks=3)
        joints = self._state.inverse(np.asarray(observation[STATE], dtype=np.float64))
        env = [float(x) for x in observation[ENV_STATE]]
        objects = {"block": ObjectPose("block", (env[0], env[1], env[2])), "goal": ObjectPose("goal", tuple(env[3:]))}
        return np.asarray(self._action.apply(self._expert.act(joints, objects)), dtype=np.float64)[None, :]


@pytest.mark.parallel_eval
@pytest.mark.skipif(not LONG, reason="about 2 min: LEROBOT_ROS_PARALLEL_EVAL=1 (or -m parallel_eval) runs it")
def test_expert_episodes_are_the_same_on_one_two_and_three_envs(contract: dict[str, Any]) -> None:
    from lerobot_contract import Contract
    from lerobot_eval.vector_evaluation import contract_env_factory, run_vector_episodes

    parsed = Contract.from_dict(contract).select([STATE, ENV_STATE, "action", FRONT])
    seeds = list(range(2000, 2006))
    runs = {}
    for num_envs in (1, 2, 3):
        result = run_vector_episodes(
            policy=ExpertChunkPolicy(contract), env_factory=contract_env_factory(
                "so101_pick_place", parsed, 30.0, "front:320x240", 450),
            num_envs=num_envs, seeds=seeds, max_steps=450, period_ns=33_333_333,
            joint_names=tuple(parsed.features["action"].dataset_names or ()), blend="replace", threshold=0.5,
            camera_key=FRONT, videos=1, progress=lambda _line: None,
        )  # fmt: skip
        runs[num_envs] = result.episodes
        assert len(result.frames[0]) == result.episodes[0]["steps"]
    assert runs[2] == runs[1] and runs[3] == runs[1]
    assert sum(e["success"] for e in runs[1]) > 0 and len({e["steps"] for e in runs[1]}) > 1
