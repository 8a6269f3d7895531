"""The training loop: over-fitting, seeding, resume, outputs, evaluation hook, CLI and hub push."""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TINY, VECTOR_INPUTS
from fake_env import EvenSeedEnv, UnreachableRobotEnv
from torch.utils.data import DataLoader

from lerobot_ros.command import CommandError
from lerobot_training.checkpoint import load_policy
from lerobot_training.data import to_policy_batch
from lerobot_training.errors import CheckpointError, TrainingError
from lerobot_training.evaluation import evaluate
from lerobot_training.train_command import COMMAND
from lerobot_training.trainer import TrainConfig, Trainer


def config(dataset: Path, out: Path, policy: str = "act", **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = {
        "steps": 4, "batch_size": 4, "lr": 1e-3, "warmup_steps": 2, "val_fraction": 0.25, "val_every": 2,
        "val_batches": 2, "save_every": 2, "log_every": 1, "seed": 5, "policy_overrides": TINY[policy],
        "progress": False,
    }  # fmt: skip
    settings.update(overrides)
    return TrainConfig(dataset=dataset, policy=policy, out=out, **settings)


def mean_train_loss(trainer: Trainer) -> float:
    """Loss over every training sample, with the RNG fixed (same noise before and after training)."""
    losses = []
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        trainer.policy.eval()
        for batch in DataLoader(trainer.train_set, batch_size=16):
            losses.append(
                float(trainer.policy.compute_loss(to_policy_batch(batch, trainer.camera_keys, trainer.device))[0])
            )
        trainer.policy.train()
    return sum(losses) / len(losses)


@pytest.mark.parametrize(
    ("policy", "inputs", "steps", "ratio"),
    [("act", VECTOR_INPUTS, 100, 0.6), ("act", None, 25, 0.8), ("diffusion", VECTOR_INPUTS, 200, 0.6)],
    ids=["act", "act-camera", "diffusion"],
)
def test_loss_goes_down_when_overfitting_a_few_episodes(
    tiny_dataset: Path, tmp_path: Path, policy: str, inputs: list[str] | None, steps: int, ratio: float
) -> None:
    overrides = {**TINY[policy], "kl_weight": 1.0} if policy == "act" else TINY[policy]
    lr = 1e-3 if policy == "act" else 3e-3
    trainer = Trainer(
        config(tiny_dataset, tmp_path / "run", policy, steps=steps, batch_size=8, val_fraction=0.0, save_every=steps,
               warmup_steps=5, log_every=10, val_every=steps, policy_overrides=overrides, lr=lr, input_features=inputs)
    )  # fmt: skip
    before = mean_train_loss(trainer)
    trainer.train()
    after = mean_train_loss(trainer)
    assert after < ratio * before, (before, after)


@pytest.mark.parametrize("policy", ["act", "diffusion"])
def test_training_is_deterministic_with_a_seed(tiny_dataset: Path, tmp_path: Path, policy: str) -> None:
    first = Trainer(config(tiny_dataset, tmp_path / "a", policy, input_features=VECTOR_INPUTS))
    first.train()
    second = Trainer(config(tiny_dataset, tmp_path / "b", policy, input_features=VECTOR_INPUTS))
    second.train()
    for key, value in first.policy.state_dict().items():
        assert torch.equal(value, second.policy.state_dict()[key]), key
    other = Trainer(config(tiny_dataset, tmp_path / "c", policy, input_features=VECTOR_INPUTS, seed=6))
    first_weights = {k: v for k, v in first.policy.state_dict().items() if not k.startswith("normalizer")}
    assert any(not torch.equal(v, other.policy.state_dict()[k]) for k, v in first_weights.items())


@pytest.mark.parametrize(
    ("policy", "inputs"), [("act", None), ("diffusion", VECTOR_INPUTS)], ids=["act-camera-augmented", "diffusion"]
)
def test_resume_gives_the_same_state_as_uninterrupted_training(
    tiny_dataset: Path, tmp_path: Path, policy: str, inputs: list[str] | None
) -> None:
    settings: dict[str, Any] = {"save_every": 3, "augment": True, "input_features": inputs}
    straight = Trainer(config(tiny_dataset, tmp_path / "straight", policy, steps=6, **settings))
    straight.train()
    interrupted = config(tiny_dataset, tmp_path / "resumed", policy, steps=3, decay_steps=6, **settings)
    Trainer(interrupted).train()
    interrupted.steps = 6
    resumed = Trainer(interrupted, resume=True)
    assert resumed.step == 3
    resumed.train()
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key
    straight_opt, resumed_opt = straight.optimizer.state_dict(), resumed.optimizer.state_dict()
    for index, state in straight_opt["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(resumed_opt["state"][index][name])), (
                index,
                name,
            )
    assert straight.scheduler.get_last_lr() == resumed.scheduler.get_last_lr()
    steps = [
        int(row["step"]) for row in csv.DictReader((tmp_path / "resumed" / "log.csv").open()) if row["split"] == "train"
    ]
    assert steps == list(range(1, 7))


def test_run_directory_holds_checkpoints_log_and_plot(make_dataset: Callable[..., Path], tmp_path: Path) -> None:
    contract = {
        "robot_type": "so101_follower",
        "fps": 10,
        "features": {"action": {"topic": "/follower/joint_commands"}},
    }
    dataset = make_dataset(episodes=3, frames=8, contract=contract)
    out = tmp_path / "run"
    final = Trainer(config(dataset, out, steps=4, save_every=2)).train()
    assert final == out / "checkpoints" / "000004" / "pretrained_model"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["000002", "000004", "last"]
    assert (out / "checkpoints" / "last").resolve() == (out / "checkpoints" / "000004").resolve()
    loaded = load_policy(out / "checkpoints" / "last" / "pretrained_model")
    assert loaded.fps == 10 and loaded.contract == contract
    assert loaded.policy.config.input_features["observation.state"].names == (
        "shoulder_pan.pos", "elbow_flex.pos", "gripper.pos",
    )  # fmt: skip
    rows = list(csv.DictReader((out / "log.csv").open()))
    assert [r["step"] for r in rows if r["split"] == "train"] == ["1", "2", "3", "4"]
    assert [r["step"] for r in rows if r["split"] == "val"] == ["2", "4"]
    assert all(float(r["samples_per_s"]) > 0 and float(r["grad_norm"]) >= 0 for r in rows if r["split"] == "train")
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "train_config.json").read_text())["steps"] == 4


def test_validation_loss_is_deterministic_and_leaves_training_rng_alone(tiny_dataset: Path, tmp_path: Path) -> None:
    trainer = Trainer(config(tiny_dataset, tmp_path / "run", "diffusion", input_features=VECTOR_INPUTS))
    state = torch.get_rng_state()
    first = trainer.validation_loss()
    assert torch.equal(torch.get_rng_state(), state)
    assert first == trainer.validation_loss()


def test_existing_run_needs_resume_and_resume_needs_a_checkpoint(tiny_dataset: Path, tmp_path: Path) -> None:
    Trainer(config(tiny_dataset, tmp_path / "run", steps=2, input_features=VECTOR_INPUTS)).train()
    with pytest.raises(TrainingError, match="--resume"):
        Trainer(config(tiny_dataset, tmp_path / "run", steps=2, input_features=VECTOR_INPUTS))
    with pytest.raises(CheckpointError, match="no checkpoint"):
        Trainer(config(tiny_dataset, tmp_path / "empty"), resume=True)


def test_evaluation_reports_the_success_rate(tiny_dataset: Path, tmp_path: Path) -> None:
    trainer = Trainer(config(tiny_dataset, tmp_path / "run"))
    env = EvenSeedEnv()
    result = evaluate(trainer.policy, env, episodes=4, max_steps=10, seed=0)
    assert result.success_rate == 0.5 and len(env.actions) == 12
    assert all(a.shape == (3,) for a in env.actions)


def test_periodic_sim_evaluation_is_logged_and_skipped_cleanly_when_absent(tiny_dataset: Path, tmp_path: Path) -> None:
    settings: dict[str, Any] = {"eval_every": 2, "eval_episodes": 2, "input_features": VECTOR_INPUTS}
    Trainer(config(tiny_dataset, tmp_path / "run", eval_env="fake_env:EvenSeedEnv", **settings)).train()
    rows = [r for r in csv.DictReader((tmp_path / "run" / "log.csv").open()) if r["split"] == "eval"]
    assert [(r["step"], float(r["success_rate"])) for r in rows] == [("2", 0.5), ("4", 0.5)]
    lines: list[str] = []
    trainer = Trainer(
        config(tiny_dataset, tmp_path / "absent", eval_env="no_such_sim:Env", **settings), write=lines.append
    )
    trainer.train()
    assert any("sim evaluation skipped" in line for line in lines)


class RecordingHfApi:
    """Stands in for huggingface_hub.HfApi (no network): records calls and what would be uploaded."""

    instances: list[RecordingHfApi] = []  # noqa: RUF012

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.uploaded: list[str] = []
        RecordingHfApi.instances.append(self)

    def create_repo(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kwargs: Any) -> None:
        self.calls.append(("upload_folder", kwargs))
        self.uploaded = sorted(p.name for p in Path(kwargs["folder_path"]).iterdir())

    def upload_file(self, **kwargs: Any) -> None:
        self.calls.append(("upload_file", kwargs))


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    COMMAND.add_arguments(parser)
    return COMMAND.run(parser.parse_args(argv))


def test_cli_trains_resumes_and_pushes_to_the_hub(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingHfApi)
    out = tmp_path / "run"
    base = ["--out", str(out), "--save-every", "2", "--val-every", "2", "--no-progress"]
    features = [f"--feature={key}" for key in VECTOR_INPUTS]
    sets = [f"--set={k}={json.dumps(v)}" for k, v in TINY["act"].items()]
    assert run_cli(["--dataset", str(tiny_dataset), "--policy", "act", "--steps", "2", *base, *sets, *features]) == 0
    assert run_cli(["--resume", "--steps", "4", *base, "--push-to-hub", "user/tiny-act"]) == 0
    assert "checkpoint: " + str(out / "checkpoints" / "000004" / "pretrained_model") in capsys.readouterr().out
    api = RecordingHfApi.instances[-1]
    assert [name for name, _ in api.calls] == ["create_repo", "upload_folder", "upload_file"]
    assert api.calls[0][1]["repo_type"] == "model"
    assert api.uploaded == [
        "config.json", "lerobot_ros.json", "model.safetensors", "policy_postprocessor.json",
        "policy_postprocessor_step_0_unnormalizer_processor.safetensors", "policy_preprocessor.json",
        "policy_preprocessor_step_3_normalizer_processor.safetensors",
    ]  # fmt: skip
    assert "LeRobot" in api.calls[2][1]["path_or_fileobj"].decode()


def test_cli_errors_name_the_problem(tiny_dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--dataset and --policy are required"):
        run_cli(["--out", str(tmp_path / "x")])
    with pytest.raises(CommandError, match="FIELD=VALUE"):
        run_cli(["--dataset", str(tiny_dataset), "--policy", "act", "--out", str(tmp_path / "x"), "--set", "oops"])
    with pytest.raises(CommandError, match="unknown act config field 'no_such_field'"):
        run_cli(
            [
                "--dataset",
                str(tiny_dataset),
                "--policy",
                "act",
                "--out",
                str(tmp_path / "y"),
                "--set",
                "no_such_field=1",
            ]
        )
    with pytest.raises(CommandError, match=r"lacks feature 'observation\.images\.top'"):
        run_cli(["--dataset", str(tiny_dataset), "--policy", "act", "--out", str(tmp_path / "z"),
                 "--feature", "observation.images.top"])  # fmt: skip
    with pytest.raises(CommandError, match="does not exist"):
        run_cli(["--out", str(tmp_path / "none"), "--resume"])
    with pytest.raises(CommandError, match=r"holds no LeRobot dataset"):
        run_cli(["--dataset", str(tmp_path / "nothing"), "--policy", "act", "--out", str(tmp_path / "w")])


def test_train_is_a_registered_lerobot_ros_command() -> None:
    from importlib.metadata import entry_points

    (entry,) = [ep for ep in entry_points(group="lerobot_ros.commands") if ep.name == "train"]
    assert entry.load() is COMMAND


def test_resume_skips_a_checkpoint_that_was_cut_off_while_saving(tiny_dataset: Path, tmp_path: Path) -> None:
    settings = config(tiny_dataset, tmp_path / "run", steps=4, save_every=2, input_features=VECTOR_INPUTS)
    Trainer(settings).train()
    (tmp_path / "run" / "checkpoints" / "000004" / "training_state" / "state.json").unlink()  # killed mid-save
    assert Trainer(settings, resume=True).step == 2


def test_a_diverging_loss_stops_training_with_a_hint(tiny_dataset: Path, tmp_path: Path) -> None:
    trainer = Trainer(config(tiny_dataset, tmp_path / "run", input_features=VECTOR_INPUTS))
    with torch.no_grad():
        trainer.policy.model.action_head.weight.fill_(float("nan"))
    with pytest.raises(TrainingError, match=r"loss became nan at step 1; lower --lr"):
        trainer.train()


def test_sim_evaluation_gets_the_dataset_contract_and_a_failure_does_not_stop_training(
    make_dataset: Callable[..., Path], tmp_path: Path
) -> None:
    contract = {"robot_type": "so101_follower", "fps": 10, "features": {}}
    dataset = make_dataset(episodes=2, frames=6, contract=contract)
    lines: list[str] = []
    settings = config(dataset, tmp_path / "run", eval_every=2, eval_env="fake_env:UnreachableRobotEnv",
                      input_features=VECTOR_INPUTS, val_fraction=0.0)  # fmt: skip
    Trainer(settings, write=lines.append).train()
    assert UnreachableRobotEnv.contracts[-1] == str(dataset / "meta" / "contract.json")
    assert [line for line in lines if "failed" in line] == [
        "sim evaluation at step 2 failed: TimeoutError: no observation within 10 s; is the sim bridge running?",
        "sim evaluation at step 4 failed: TimeoutError: no observation within 10 s; is the sim bridge running?",
    ]
    assert (tmp_path / "run" / "checkpoints" / "last").exists()


def test_worker_processes_give_the_same_training_as_the_main_process(tiny_dataset: Path, tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "steps": 2,
        "augment": True,
        "val_fraction": 0.0,
        "policy_overrides": {**TINY["act"], "dropout": 0.0},
    }
    main = Trainer(config(tiny_dataset, tmp_path / "main", num_workers=0, **settings))
    main.train()
    workers = Trainer(config(tiny_dataset, tmp_path / "workers", num_workers=2, **settings))
    workers.train()
    for key, value in main.policy.state_dict().items():
        assert torch.equal(value, workers.policy.state_dict()[key]), key


def test_pretrained_backbone_initialises_the_policy_and_is_recorded(tiny_dataset: Path, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    from lerobot_training.policies.resnet import ResNet18Backbone

    weights = {k: torch.randn_like(v) for k, v in ResNet18Backbone().state_dict().items()}
    save_file(weights, str(tmp_path / "resnet18.safetensors"))
    trainer = Trainer(config(tiny_dataset, tmp_path / "run", pretrained_backbone=tmp_path / "resnet18.safetensors"))
    assert torch.equal(trainer.policy.model.backbone.conv1.weight, weights["conv1.weight"])
    assert trainer.policy.config.pretrained_backbone_weights == str(tmp_path / "resnet18.safetensors")
    with pytest.raises(TrainingError, match="use_group_norm"):
        Trainer(
            config(tiny_dataset, tmp_path / "d", "diffusion", pretrained_backbone=tmp_path / "resnet18.safetensors")
        )


def test_act_trains_on_cameras_of_different_sizes_and_predicts_from_its_checkpoint(
    make_dataset: Callable[..., Path], tmp_path: Path
) -> None:
    dataset = make_dataset(episodes=2, frames=8, image_shape=(32, 48, 3), extra_cameras={"wrist": (24, 40, 3)})
    final = Trainer(config(dataset, tmp_path / "run", steps=2, save_every=2)).train()
    loaded = load_policy(final)
    shapes = {key: ft.shape for key, ft in loaded.policy.config.image_features.items()}
    assert shapes == {"observation.images.front": (3, 32, 48), "observation.images.wrist": (3, 24, 40)}
    observation = {
        "observation.state": torch.zeros(3),
        "observation.environment_state": torch.zeros(2),
        "observation.images.front": torch.zeros(32, 48, 3, dtype=torch.uint8),
        "observation.images.wrist": torch.zeros(24, 40, 3, dtype=torch.uint8),
    }
    chunk = loaded.policy.predict_chunk(observation)
    assert chunk.shape == (TINY["act"]["chunk_size"], 3) and torch.isfinite(chunk).all()
