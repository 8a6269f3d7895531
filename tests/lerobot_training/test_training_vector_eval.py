"""The trainer's periodic evaluation on a vector env: the serial outcomes, seed by seed, N episodes at a time.

The default run uses a small gymnasium env (fake_env.SeededReachEnv: the outcome depends on the actions, episodes
of different lengths) in spawned workers; the SO-101 sim (`contract_sim_env`) is compared behind
LEROBOT_ROS_PARALLEL_EVAL=1 (or -m parallel_eval).
"""

from __future__ import annotations

import csv
import functools
import os
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import TINY, VECTOR_INPUTS
from fake_env import SeededReachEnv

from lerobot_ros.vector_env import make_vector_env
from lerobot_training.errors import PolicyConfigError
from lerobot_training.evaluation import evaluate, evaluate_vector
from lerobot_training.trainer import TrainConfig, Trainer

REPO = Path(__file__).resolve().parents[2]
LONG = os.environ.get("LEROBOT_ROS_PARALLEL_EVAL") == "1"


def config(dataset: Path, out: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = {
        "steps": 4, "batch_size": 4, "lr": 1e-3, "warmup_steps": 2, "val_fraction": 0.0, "save_every": 4,
        "log_every": 1, "seed": 5, "policy_overrides": TINY["act"], "progress": False, "input_features": VECTOR_INPUTS,
    }  # fmt: skip
    settings.update(overrides)
    return TrainConfig(dataset=dataset, policy="act", out=out, **settings)


def test_two_envs_give_the_serial_outcomes_seed_by_seed(tiny_dataset: Path, tmp_path: Path) -> None:
    policy = Trainer(config(tiny_dataset, tmp_path / "run")).policy
    serial = evaluate(policy, SeededReachEnv(), episodes=7, max_steps=5, seed=10)
    envs = make_vector_env(2, SeededReachEnv)
    try:
        vector = evaluate_vector(policy, envs, episodes=7, max_steps=5, seed=10)
    finally:
        envs.close()
    assert [o.seed for o in vector.per_episode] == list(range(10, 17))
    # Returns are sums of the actions: equal returns, equal actions. Episodes of 3..6 steps, cut at 5.
    assert vector.per_episode == serial.per_episode
    assert {o.steps for o in serial.per_episode} == {3, 4, 5}
    assert 0 < serial.successes < 7, "the outcome must depend on the policy's actions for this test to mean much"
    assert policy.training  # evaluate_vector puts the policy back in training mode


def test_periodic_evaluation_on_two_envs_logs_the_serial_success_rates(tiny_dataset: Path, tmp_path: Path) -> None:
    rates = {}
    for envs in (1, 2):
        out = tmp_path / f"envs_{envs}"
        lines: list[str] = []
        settings = config(tiny_dataset, out, eval_every=2, eval_episodes=5, eval_max_steps=5,
                          eval_env="fake_env:SeededReachEnv", eval_num_envs=envs)  # fmt: skip
        Trainer(settings, write=lines.append).train()
        assert not [line for line in lines if "failed" in line], lines
        rows = [r for r in csv.DictReader((out / "log.csv").open()) if r["split"] == "eval"]
        rates[envs] = [(r["step"], r["success_rate"]) for r in rows]
        assert (envs > 1) == any("5 episodes on 2 envs at a time" in line for line in lines)
    assert rates[1] == rates[2] and [step for step, _ in rates[1]] == ["2", "4"]


def test_eval_num_envs_is_checked_before_training(tiny_dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(PolicyConfigError, match=r"^eval_num_envs must be a number >= 1 or 'auto', got 0$"):
        config(tiny_dataset, tmp_path / "zero", eval_every=2, eval_num_envs=0)
    settings = config(tiny_dataset, tmp_path / "many", eval_every=2, eval_num_envs=100_000, eval_episodes=5)
    with pytest.raises(PolicyConfigError, match=r"^--eval-num-envs 100000: this machine holds at most \d+ envs") as err:
        Trainer(settings)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "many" / "log.csv").exists()


def test_the_cli_takes_eval_num_envs(tiny_dataset: Path, tmp_path: Path) -> None:
    import argparse

    from lerobot_ros.command import CommandError
    from lerobot_training.train_command import COMMAND

    parser = argparse.ArgumentParser()
    COMMAND.add_arguments(parser)
    base = ["--dataset", str(tiny_dataset), "--policy", "act", "--out", str(tmp_path / "cli"), "--eval-every", "2"]
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--eval-num-envs", "none"])
    args = parser.parse_args([*base, "--eval-num-envs", "100000", "--steps", "1"])
    with pytest.raises(CommandError, match=r"--eval-num-envs 100000: this machine holds at most"):
        COMMAND.run(args)
    assert parser.parse_args([*base, "--eval-num-envs", "auto"]).eval_num_envs == "auto"


@pytest.mark.parallel_eval
@pytest.mark.skipif(not LONG, reason="about 1 min: LEROBOT_ROS_PARALLEL_EVAL=1 (or -m parallel_eval) runs it")
def test_the_sim_gives_the_serial_outcomes_on_two_envs() -> None:
    from lerobot_sim_bridge.contract_env import contract_sim_env
    from lerobot_training.features import FeatureType, PolicyFeature
    from lerobot_training.policies.act import ACTConfig, ACTPolicy

    contract_path = REPO / "config" / "contracts" / "so101_sim.yaml"
    features = yaml.safe_load(contract_path.read_text())["features"]
    state, env_state = "observation.state", "observation.environment_state"
    torch.manual_seed(0)
    inputs = {
        state: PolicyFeature(FeatureType.STATE, (6,), tuple(features[state]["names"])),
        env_state: PolicyFeature(FeatureType.ENV, (6,), tuple(features[env_state]["names"])),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,), tuple(features["action"]["names"]))}
    act = ACTConfig(
        input_features=inputs, output_features=outputs, chunk_size=8, n_action_steps=8, dim_model=32, n_heads=2,
        dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1, use_vae=False,
    )  # fmt: skip
    stats = {key: {"mean": torch.zeros(6), "std": torch.full((6,), 20.0)} for key in (state, env_state, "action")}
    stats = {k: {**v, "min": v["mean"] - 60, "max": v["mean"] + 60} for k, v in stats.items()}
    policy = ACTPolicy(act, stats)
    factory = functools.partial(contract_sim_env, contract=str(contract_path), features=[state, env_state])
    serial = evaluate(policy, factory(), episodes=4, max_steps=40, seed=100)
    envs = make_vector_env(2, factory)
    try:
        vector = evaluate_vector(policy, envs, episodes=4, max_steps=40, seed=100)
    finally:
        envs.close()
    assert vector.per_episode == serial.per_episode
    assert len({o.reward for o in serial.per_episode}) == 4  # each seed its own episode
