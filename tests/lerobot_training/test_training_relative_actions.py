"""Relative actions (issue #19 item 1): targets are action - state at the frame for the chosen joints, statistics of
those values, the choice in lerobot_ros.json, and absolute chunks again at inference from the observation's state."""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import STATE_NAMES, TINY, VECTOR_INPUTS
from fake_env import EvenSeedEnv

from lerobot_dataset import DatasetReader, DatasetWriter, FeatureSpec
from lerobot_ros.command import CommandError
from lerobot_training.checkpoint import load_policy, read_metadata
from lerobot_training.data import PolicyDataset
from lerobot_training.errors import CheckpointError, FeatureMismatchError
from lerobot_training.evaluation import evaluate
from lerobot_training.relative_actions import RelativeActions, window_offsets
from lerobot_training.train_command import COMMAND, _argv_of
from lerobot_training.trainer import TrainConfig, Trainer


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    COMMAND.add_arguments(parser)
    return COMMAND.run(parser.parse_args(argv))


def train(dataset: Path, out: Path, policy: str = "act", **overrides: Any) -> Trainer:
    settings: dict[str, Any] = {
        "steps": 2, "batch_size": 4, "warmup_steps": 1, "val_fraction": 0.25, "val_every": 2, "val_batches": 1,
        "save_every": 2, "log_every": 1, "seed": 5, "policy_overrides": TINY[policy], "progress": False,
        "input_features": VECTOR_INPUTS, "relative_actions": [],
    }  # fmt: skip
    settings.update(overrides)
    trainer = Trainer(TrainConfig(dataset=dataset, policy=policy, out=out, **settings))
    trainer.train()
    return trainer


Run = tuple[Trainer, Path]  # the trainer and its final checkpoint


@pytest.fixture(scope="module")
def relative_run(tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """A 2-step run with relative actions (every joint but the gripper) per policy type, trained once per module."""
    runs: dict[str, Run] = {}

    def get(policy: str = "act") -> Run:
        if policy not in runs:
            out = tmp_path_factory.mktemp(f"relative_{policy}") / "run"
            runs[policy] = (train(tiny_dataset, out, policy), out / "checkpoints" / "000002" / "pretrained_model")
        return runs[policy]

    return get


def test_default_joints_are_all_but_the_gripper_and_named_joints_match_with_or_without_pos() -> None:
    relative = RelativeActions.choose(STATE_NAMES, STATE_NAMES)
    assert relative.joints == ("shoulder_pan.pos", "elbow_flex.pos")
    assert relative.action_indices == relative.state_indices == (0, 1)
    named = RelativeActions.choose(STATE_NAMES, list(reversed(STATE_NAMES)), ["elbow_flex", "gripper.pos"])
    assert named.joints == ("elbow_flex.pos", "gripper.pos")
    assert named.action_indices == (1, 2) and named.state_indices == (1, 0)  # matched by name, not position
    assert RelativeActions.from_json(named.to_json(), "x") == named


def test_round_trip_on_a_recorded_episode_is_exact(tiny_dataset: Path) -> None:
    reader = DatasetReader(tiny_dataset)
    actions = reader.episode_frames(1, "action")
    states = reader.episode_frames(1, "observation.state")
    reader.close()
    relative = RelativeActions.choose(STATE_NAMES, STATE_NAMES)
    chunk = 6
    for frame in range(len(actions)):
        window = actions[frame : frame + chunk]
        offsets = relative.to_relative(window, states[frame])
        assert np.array_equal(offsets[:, 2], window[:, 2])  # the gripper stays absolute
        assert np.allclose(offsets[:, :2], window[:, :2] - states[frame, :2])
        assert np.array_equal(relative.to_absolute(offsets, states[frame]), window.astype(np.float64))


def test_training_samples_are_offsets_from_the_state_at_the_frame(tiny_dataset: Path, relative_run) -> None:
    trainer, _ = relative_run()
    sample = trainer.train_set[5]
    episode, frame, _ = trainer.train_set._positions[5]
    reader = DatasetReader(tiny_dataset)
    actions = reader.episode_frames(episode, "action")
    state = reader.episode_frames(episode, "observation.state")[frame]
    reader.close()
    window = actions[frame : frame + 6]
    got = sample["action"].numpy()[: len(window)]
    assert np.allclose(got[:, :2], window[:, :2] - state[:2], atol=1e-6)
    assert np.array_equal(got[:, 2], window[:, 2])


def test_training_writes_statistics_of_the_relative_values_and_records_the_choice(
    tiny_dataset: Path, relative_run
) -> None:
    trainer, directory = relative_run()
    relative = trainer.relative_actions
    assert relative is not None
    reader = DatasetReader(tiny_dataset)
    values = np.concatenate([
        window_offsets(relative, reader.episode_frames(e, "action"), reader.episode_frames(e, "observation.state"),
                       range(6))
        for e in trainer.train_episodes
    ])  # fmt: skip
    stats_json = json.loads((tiny_dataset / "meta" / "stats.json").read_text())["action"]
    reader.close()
    from safetensors.torch import load_file

    saved = load_file(str(directory / "policy_postprocessor_step_0_unnormalizer_processor.safetensors"))
    assert np.allclose(saved["action.mean"].numpy(), values.mean(axis=0), atol=1e-5)
    assert np.allclose(saved["action.std"].numpy(), values.std(axis=0), atol=1e-5)
    assert not np.allclose(saved["action.mean"].numpy()[:2], np.asarray(stats_json["mean"])[:2], atol=1e-2)
    meta = read_metadata(directory)
    assert meta["relative_actions"]["joints"] == ["shoulder_pan.pos", "elbow_flex.pos"]
    assert "relative" not in (directory / "config.json").read_text()  # config.json stays LeRobot's
    assert load_policy(directory).policy.relative_actions == relative


@pytest.mark.parametrize("policy", ["act", "diffusion"])
def test_inference_adds_the_state_of_the_observation_the_chunk_was_computed_from(relative_run, policy: str) -> None:
    loaded = load_policy(relative_run(policy)[1]).policy
    for state in ([0.5, -0.25, 7.0], [3.0, 1.0, 40.0]):
        observation = {
            "observation.state": np.asarray(state, dtype=np.float32),
            "observation.environment_state": np.asarray([1.0, 0.5], dtype=np.float32),
        }
        torch.manual_seed(0)
        absolute = loaded.predict_chunk(observation)
        torch.manual_seed(0)
        offsets = loaded.predict_chunk_batch(loaded.prepare_observation(observation))[0]
        expected = offsets.clone()
        expected[:, :2] += torch.tensor(state[:2])
        assert torch.allclose(absolute, expected)


def test_sim_evaluation_sends_absolute_targets(relative_run) -> None:
    policy = load_policy(relative_run()[1]).policy
    env = EvenSeedEnv(episode_length=1)
    # the same observation the env returns at reset, and its chunk in model space
    observation, _ = EvenSeedEnv().reset(seed=0)
    policy.eval()
    with torch.no_grad():
        offsets = policy.predict_chunk_batch(policy.prepare_observation(observation))[0]
    evaluate(policy, env, episodes=1, max_steps=1, seed=0)
    sent = env.actions[0]
    state = observation["observation.state"]
    assert np.allclose(sent[:2], offsets[0, :2].numpy() + state[:2], atol=1e-5)
    assert np.isclose(sent[2], float(offsets[0, 2]), atol=1e-5)


def test_window_of_the_diffusion_history_uses_the_newest_state(relative_run) -> None:
    policy = relative_run("diffusion")[0].policy
    chunk = torch.zeros(8, 3)
    batch = {"observation.state": torch.tensor([[[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]])}
    assert policy.absolute_chunk(chunk, batch)[0].tolist() == [10.0, 20.0, 0.0]


def _dataset_without_state(root: Path) -> Path:
    features = {
        "observation.environment_state": FeatureSpec("float32", (2,), ["x", "y"]),
        "action": FeatureSpec("float32", (3,), STATE_NAMES),
    }
    with DatasetWriter.create(root, repo_id="local/nostate", fps=10, features=features) as writer:
        for _ in range(2):
            writer.start_episode("move")
            for frame in range(8):
                writer.add_frame({"observation.environment_state": np.array([frame, 0.0], dtype=np.float32),
                                  "action": np.array([frame, 1.0, 2.0], dtype=np.float32)})  # fmt: skip
            writer.save_episode()
    return root


def test_bad_input_is_one_line_naming_what_is_wrong(tiny_dataset: Path, tmp_path: Path) -> None:
    base = ["--policy", "act", "--steps", "1", "--no-progress", *[f"--set={k}={json.dumps(v)}" for k, v in
            TINY["act"].items()]]  # fmt: skip
    no_state = _dataset_without_state(tmp_path / "nostate")
    with pytest.raises(CommandError, match=r"needs the dataset's 'observation.state' feature") as err:
        run_cli(["--dataset", str(no_state), "--out", str(tmp_path / "a"), "--relative-actions", *base])
    assert "\n" not in str(err.value)
    with pytest.raises(CommandError, match=r"'wrist_roll' is not an action joint of this dataset") as err:
        run_cli(["--dataset", str(tiny_dataset), "--out", str(tmp_path / "b"), "--relative-actions", "wrist_roll",
                 *base])  # fmt: skip
    assert "shoulder_pan.pos, elbow_flex.pos, gripper.pos" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(CommandError, match=r"add --feature observation.state"):
        run_cli(["--dataset", str(tiny_dataset), "--out", str(tmp_path / "c"), "--relative-actions",
                 "--feature", "observation.environment_state", *base])  # fmt: skip
    with pytest.raises(FeatureMismatchError, match="has no element names"):
        RelativeActions.choose(STATE_NAMES, None)
    with pytest.raises(CheckpointError, match="'relative_actions' is malformed"):
        RelativeActions.from_json({"joints": ["a"]}, "lerobot_ros.json")


def test_cli_flag_reaches_the_run_and_the_torchrun_command_line(tiny_dataset: Path, tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    COMMAND.add_arguments(parser)
    args = parser.parse_args(["--dataset", "d", "--policy", "act", "--out", "o", "--relative-actions", "elbow_flex",
                              "shoulder_pan", "--steps", "3"])  # fmt: skip
    assert args.relative_actions == ["elbow_flex", "shoulder_pan"]
    assert parser.parse_args(_argv_of(args)).relative_actions == ["elbow_flex", "shoulder_pan"]
    args = parser.parse_args(["--dataset", "d", "--policy", "act", "--out", "o", "--relative-actions"])
    assert parser.parse_args(_argv_of(args)).relative_actions == []
    assert parser.parse_args(["--out", "o"]).relative_actions is None
    out = tmp_path / "run"
    sets = [f"--set={k}={json.dumps(v)}" for k, v in TINY["act"].items()]
    argv = ["--dataset", str(tiny_dataset), "--policy", "act", "--out", str(out), "--steps", "1", "--no-progress",
            "--relative-actions", "elbow_flex", *sets]  # fmt: skip
    assert run_cli(argv) == 0
    assert json.loads((out / "train_config.json").read_text())["relative_actions"] == ["elbow_flex"]
    assert read_metadata(out / "checkpoints" / "last" / "pretrained_model")["relative_actions"]["joints"] == [
        "elbow_flex.pos"
    ]


def test_policy_dataset_without_relative_actions_is_unchanged(tiny_dataset: Path, tmp_path: Path) -> None:
    trainer = train(tiny_dataset, tmp_path / "run", relative_actions=None)
    assert trainer.policy.relative_actions is None
    assert "relative_actions" not in read_metadata(tmp_path / "run" / "checkpoints" / "000002" / "pretrained_model")
    dataset = PolicyDataset(tiny_dataset, [0], trainer.policy.config)
    reader = DatasetReader(tiny_dataset)
    assert np.array_equal(dataset[0]["action"].numpy(), reader.episode_frames(0, "action")[:6])
    reader.close()


def test_processor_files_carry_lerobots_relative_steps_around_the_normaliser(relative_run, tmp_path: Path) -> None:
    trainer, directory = relative_run()
    pre = json.loads((directory / "policy_preprocessor.json").read_text())["steps"]
    post = json.loads((directory / "policy_postprocessor.json").read_text())["steps"]
    assert [s["registry_name"] for s in pre] == [
        "rename_observations_processor", "to_batch_processor", "relative_actions_processor", "device_processor",
        "normalizer_processor",
    ]  # fmt: skip
    assert pre[2]["config"] == {"enabled": True, "exclude_joints": ["gripper.pos"], "action_names": STATE_NAMES}
    assert pre[4]["state_file"] == "policy_preprocessor_step_4_normalizer_processor.safetensors"
    assert (directory / pre[4]["state_file"]).is_file()
    assert [s["registry_name"] for s in post] == [
        "unnormalizer_processor",
        "absolute_actions_processor",
        "device_processor",
    ]
    # state and action in another order: LeRobot's index-aligned rule would subtract the wrong joint
    swapped = copy.deepcopy(trainer.policy)
    swapped.relative_actions = RelativeActions(("elbow_flex.pos",), (1,), (0,), 3)
    from lerobot_training.checkpoint import save_policy

    save_policy(tmp_path / "swapped", swapped, fps=10)
    steps = json.loads((tmp_path / "swapped" / "policy_preprocessor.json").read_text())["steps"]
    assert steps[2]["registry_name"] == "lerobot_ros_relative_actions_processor"


@pytest.mark.reference
@pytest.mark.slow
def test_lerobot_0_4_refuses_a_relative_checkpoint_instead_of_running_offsets_as_targets(
    relative_run, tmp_path: Path
) -> None:
    import subprocess

    from lerobot_ros.testing import reference_env, reference_has, reference_lerobot_version, reference_python

    if not reference_has("draccus"):
        pytest.skip("needs .venv-lerobot-ref (scripts/setup.sh --with-lerobot-reference) and its ACT extras")
    if reference_lerobot_version() >= (0, 5):
        pytest.skip("LeRobot 0.4's refusal: the reference venv holds a newer LeRobot (make test-lerobot-044 runs it)")
    directory = relative_run()[1]
    script = (
        "import sys\nfrom lerobot.policies.factory import get_policy_class, make_pre_post_processors\n"
        "policy = get_policy_class('act').from_pretrained(sys.argv[1])\n"
        "try:\n    make_pre_post_processors(policy.config, pretrained_path=sys.argv[1])\n"
        "except Exception as err:\n    print('REFUSED', type(err).__name__, err)\nelse:\n    print('LOADED')\n"
    )
    result = subprocess.run(
        [str(reference_python()), "-c", script, str(directory)], env=reference_env(tmp_path), capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REFUSED" in result.stdout and "relative_actions_processor" in result.stdout, result.stdout[-2000:]
