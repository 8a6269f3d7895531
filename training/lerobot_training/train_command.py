"""`lerobot-ros train`: train ACT or a diffusion policy on a LeRobot v3 dataset, write checkpoints.

lerobot-ros train --dataset DIR --policy act --out runs/act --steps 2000 --batch-size 8
lerobot-ros train --dataset DIR_A --dataset user/name --policy act --out runs/act   # several datasets, Hub ids
lerobot-ros train --out runs/act --resume --steps 4000     # continue (and extend) a run
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lerobot_ros.command import Command, CommandError

POLICIES = ("act", "diffusion")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        action="append",
        help="LeRobot v3 dataset directory, or a Hub dataset repo id user/name (downloaded into the HF cache); "
        "repeat to train on several datasets with the same features and fps (not needed with --resume)",
    )
    parser.add_argument("--policy", choices=POLICIES, help="policy type to train (not needed with --resume)")
    parser.add_argument("--out", type=Path, required=True, help="run directory: checkpoints/, log.csv, curves.png")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument("--steps", type=int, help="total optimisation steps (default 1000)")
    parser.add_argument("--batch-size", type=int, help="samples per step (default 8)")
    parser.add_argument("--lr", type=float, help="peak learning rate (default: the policy's optimizer_lr)")
    parser.add_argument("--weight-decay", type=float, help="AdamW weight decay (default: the policy's)")
    parser.add_argument("--warmup-steps", type=int, help="linear warm-up steps (default 100)")
    parser.add_argument("--decay-steps", type=int, help="cosine decay length in steps (default: --steps)")
    parser.add_argument("--grad-clip-norm", type=float, help="gradient norm clip (default 10)")
    parser.add_argument("--seed", type=int, help="seed of weights, split, batches and noise (default 1000)")
    parser.add_argument("--val-fraction", type=float, help="fraction of episodes held out for validation (0.1)")
    parser.add_argument("--val-every", type=int, help="steps between validation losses (default 100)")
    parser.add_argument("--save-every", type=int, help="steps between checkpoints (default 500)")
    parser.add_argument("--log-every", type=int, help="steps between log rows (default 10)")
    parser.add_argument("--num-workers", type=int, help="DataLoader worker processes (default 0)")
    parser.add_argument("--device", help="cpu, cuda, cuda:1 or auto (default auto: CUDA when present)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's; 1 is best on busy machines)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="policy config field, LeRobot's names (e.g. chunk_size=50, dim_model=256, down_dims=[64,128]); repeatable",
    )
    parser.add_argument("--feature", dest="features", action="append", help="input feature to use (repeatable)")
    parser.add_argument("--image-stats", choices=("dataset", "imagenet"), help="camera normalisation statistics")
    parser.add_argument(
        "--augment",
        action="store_true",
        default=None,
        help="camera transforms, LeRobot's default table (brightness, contrast, saturation, hue, sharpness, affine)",
    )
    parser.add_argument(
        "--image-transforms",
        metavar="JSON|@FILE",
        help='camera transforms as LeRobot configures them, e.g. \'{"max_num_transforms": 2, "tfs": {"b": {"type": '
        '"ColorJitter", "kwargs": {"brightness": [0.7, 1.3]}}}}\' (docs/packages/training.md lists the types)',
    )
    parser.add_argument(
        "--relative-actions",
        nargs="*",
        metavar="JOINT",
        help="targets are action - observation.state at the frame for these joints (names as in the action, "
        "e.g. shoulder_pan or shoulder_pan.pos); no JOINT: every joint but the gripper, as LeRobot does",
    )
    parser.add_argument("--pretrained-backbone", type=Path, help="local resnet18 weights (.safetensors or .pth)")
    parser.add_argument("--eval-every", type=int, help="steps between sim evaluations (0 = never, the default)")
    parser.add_argument("--eval-episodes", type=int, help="episodes per sim evaluation (default 5)")
    parser.add_argument(
        "--eval-env",
        help="environment factory module:callable (default lerobot_sim_bridge.contract_env:contract_sim_env, the sim "
        "in this process; lerobot_sim_bridge.ros_env:RosRobotEnv drives a running sim bridge)",
    )
    parser.add_argument("--eval-max-steps", type=int, help="step limit of an evaluation episode (default 300)")
    parser.add_argument(
        "--eval-env-kwargs", type=json.loads, help="JSON object of keyword arguments for the env factory"
    )
    parser.add_argument(
        "--eval-num-envs",
        type=_num_envs,
        metavar="N",
        help="evaluation envs stepped at once, each in a worker process (default: one per core for the default "
        "in-process sim, 1 for another --eval-env; 'auto': one per core)",
    )
    parser.add_argument("--push-to-hub", metavar="REPO_ID", help="upload the final checkpoint to this model repo")
    parser.add_argument("--private", action="store_true", help="create the hub repo private")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--nproc",
        type=int,
        default=1,
        help="data-parallel processes on this machine (torchrun; --batch-size is per process). For several "
        "machines run `torchrun --nnodes ... -m lerobot_ros.cli train ...` on each (docs/packages/training.md)",
    )


_FLAG_FIELDS = {
    "steps": "steps",
    "batch_size": "batch_size",
    "lr": "lr",
    "weight_decay": "weight_decay",
    "warmup_steps": "warmup_steps",
    "decay_steps": "decay_steps",
    "grad_clip_norm": "grad_clip_norm",
    "seed": "seed",
    "val_fraction": "val_fraction",
    "val_every": "val_every",
    "save_every": "save_every",
    "log_every": "log_every",
    "num_workers": "num_workers",
    "device": "device",
    "threads": "threads",
    "features": "input_features",
    "image_stats": "image_stats",
    "augment": "augment",
    "image_transforms": "image_transforms",
    "pretrained_backbone": "pretrained_backbone",
    "eval_every": "eval_every",
    "eval_episodes": "eval_episodes",
    "eval_env": "eval_env",
    "eval_max_steps": "eval_max_steps",
    "eval_env_kwargs": "eval_env_kwargs",
    "eval_num_envs": "eval_num_envs",
    "relative_actions": "relative_actions",
}
# Settings a resumed run may change; the rest would make it a different run.
_RESUMABLE = {"steps", "decay_steps", "num_workers", "device", "threads", "val_every", "save_every", "log_every",
              "eval_every", "eval_episodes", "eval_env", "eval_max_steps", "eval_env_kwargs",
              "eval_num_envs"}  # fmt: skip


def _num_envs(text: str) -> int | str:
    """`--eval-num-envs`: a number >= 1 or 'auto'."""
    if text == "auto":
        return text
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 1 or 'auto', got {text!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be a number >= 1 or 'auto', got {count}")
    return count


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`FIELD=VALUE` pairs; VALUE is JSON when it parses (numbers, lists, null, true), a string otherwise."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise CommandError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set chunk_size=50")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def _read_json_argument(option: str, value: str) -> Any:
    """A JSON value given inline or as @FILE; CommandError naming the option when it does not parse."""
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text()
        except OSError as err:
            raise CommandError(f"{option} {value}: cannot read the file ({err.strerror})") from None
    try:
        return json.loads(text)
    except ValueError as err:
        raise CommandError(f"{option}: not valid JSON ({err})") from None


def _argv_of(args: argparse.Namespace) -> list[str]:
    """The command line of `args` without `--nproc` (what each torchrun worker runs)."""
    argv: list[str] = []
    for flag in ("dataset", "policy", "out", "push_to_hub", *_FLAG_FIELDS):
        value = getattr(args, flag)
        option = "--" + ("feature" if flag == "features" else flag.replace("_", "-"))
        if value is None or flag in ("augment",):
            continue
        if flag in ("features", "dataset"):
            for item in value:
                argv += [option, str(item)]
        elif flag == "relative_actions":
            argv += [option, *map(str, value)]
        elif flag == "eval_env_kwargs":
            argv += [option, json.dumps(value)]
        else:
            argv += [option, str(value)]
    for item in args.overrides:
        argv += ["--set", item]
    switches = ("resume", "private", "no_progress", "augment")
    argv += [f"--{flag.replace('_', '-')}" for flag in switches if getattr(args, flag)]
    return argv


def _launch_torchrun(args: argparse.Namespace) -> int:
    """Check the settings, then re-run this command under torchrun with `--nproc` processes.

    A bad setting is refused here, before any rank starts (one line, exit 2). A rank that fails ends the run with
    one line: what failed on which rank (its own error, which it files instead of printing, or the signal that
    killed it) and the last complete checkpoint; torchrun runs quietly (`lerobot_training.distributed.launch`).
    """
    import os
    import signal
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from lerobot_ros.parent_death import parent_death_signal

    if args.nproc < 1:
        raise CommandError(f"--nproc must be >= 1, got {args.nproc}")
    if "WORLD_SIZE" in os.environ:
        raise CommandError("--nproc is for a plain process; under torchrun, give torchrun --nproc-per-node instead")
    _check_settings(args)
    with tempfile.TemporaryDirectory(prefix="lerobot-train-") as failures:
        command = [
            sys.executable, "-m", "lerobot_training.distributed", failures, "--standalone",
            f"--nproc-per-node={args.nproc}", "-m", "lerobot_ros.cli", "train", *_argv_of(args),
        ]  # fmt: skip
        try:
            # SIGTERM to torchrun (which stops its ranks) when this process dies, even by SIGKILL.
            result = subprocess.run(command, check=False, preexec_fn=parent_death_signal(signal.SIGTERM))
        except KeyboardInterrupt:
            return 130
        if result.returncode == 0:
            return 0
        from lerobot_training.distributed import failure_line
        from lerobot_training.trainer import last_checkpoint

        what = failure_line(Path(failures)) or f"torchrun exit status {result.returncode}"
    last = last_checkpoint(args.out)
    where = f"the last complete checkpoint is {last} (continue with --resume)" if last else "no checkpoint saved"
    raise CommandError(f"distributed training failed: {what}; {where}", exit_code=1)


def _check_settings(args: argparse.Namespace) -> None:
    """The checks each rank would make of the settings, made once (CommandError)."""
    from lerobot_dataset import DatasetError
    from lerobot_training.errors import TrainingError
    from lerobot_training.trainer import preflight

    try:
        preflight(_config(args), resume=args.resume)
    except (TrainingError, DatasetError) as err:
        raise CommandError(str(err)) from None
    except (ValueError, TypeError) as err:
        raise CommandError(f"invalid training settings: {err}") from None


def _run(args: argparse.Namespace) -> int:
    from lerobot_training.errors import TrainingError

    if args.dataset:
        from lerobot_training.hub import resolve_dataset

        try:  # before torchrun: the ranks get local folders, downloaded once
            args.dataset = [str(resolve_dataset(value)) for value in args.dataset]
        except TrainingError as err:
            raise CommandError(str(err)) from None
    if args.nproc != 1:
        return _launch_torchrun(args)
    from lerobot_training.distributed import file_failure

    try:
        return _train(args)
    except CommandError as err:
        if file_failure(str(err)):  # a rank of `--nproc`: the launching command reports it, in one line
            return int(err.exit_code)
        raise


def _config(args: argparse.Namespace) -> Any:
    """The `TrainConfig` of the command line (a resumed run's saved settings with the changes allowed)."""
    from lerobot_training.trainer import TrainConfig

    given = {field: getattr(args, flag) for flag, field in _FLAG_FIELDS.items() if getattr(args, flag) is not None}
    if "image_transforms" in given:
        given["image_transforms"] = _read_json_argument("--image-transforms", given["image_transforms"])
    if args.resume:
        saved = args.out / "train_config.json"
        if not saved.is_file():
            raise CommandError(f"--resume: {saved} does not exist; start the run without --resume first")
        changed = sorted(set(given) - _RESUMABLE)
        if changed or args.overrides or args.dataset or args.policy:
            raise CommandError(
                f"--resume continues the saved run; only {', '.join(sorted(_RESUMABLE))} may change "
                f"(got {', '.join(changed) or 'dataset/policy/--set'})"
            )
        return TrainConfig.from_json({**json.loads(saved.read_text()), **given, "progress": not args.no_progress})
    if args.dataset is None or args.policy is None:
        raise CommandError("--dataset and --policy are required (unless --resume)")
    return TrainConfig(
        dataset=[Path(value) for value in args.dataset],
        policy=args.policy,
        out=args.out,
        policy_overrides=parse_overrides(args.overrides),
        progress=not args.no_progress,
        **given,
    )


def _train(args: argparse.Namespace) -> int:
    from lerobot_dataset import DatasetError
    from lerobot_training.distributed import end_rank
    from lerobot_training.errors import TrainingError
    from lerobot_training.trainer import Trainer

    try:
        config = _config(args)
        trainer = Trainer(config, resume=args.resume, write=print)
        final = trainer.train()
        if not trainer.dist.is_main:
            end_rank(0)  # rank 0 reports and pushes
    except (TrainingError, DatasetError) as err:
        raise CommandError(str(err)) from None
    except (ValueError, TypeError) as err:
        raise CommandError(f"invalid training settings: {err}") from None
    print(f"checkpoint: {final}")
    if args.push_to_hub:
        from lerobot_training.hub import push_checkpoint

        try:
            url = push_checkpoint(final, args.push_to_hub, private=args.private)
        except TrainingError as err:
            raise CommandError(str(err)) from None
        print(f"pushed to {url}")
    if trainer.dist.enabled:
        end_rank(0)
    return 0


COMMAND = Command(
    name="train",
    help="train ACT or a diffusion policy on a LeRobot v3 dataset",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
