"""The training loop: AdamW, warm-up + cosine schedule, gradient clipping, seeding, validation,
checkpoints every N steps with resume, CSV log + PNG curves, optional simulation evaluation.

Output directory:

    OUT/train_config.json                      the run's settings (read back by --resume)
    OUT/log.csv, OUT/curves.png                 metrics per logged step, and their plot
    OUT/checkpoints/<step>/pretrained_model/    a checkpoint the policy node loads (see checkpoint.py)
    OUT/checkpoints/<step>/training_state/      optimiser, scheduler and RNG state for --resume
    OUT/checkpoints/last                        symlink to the newest step
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from lerobot_training.checkpoint import load_policy, save_policy, write_atomic
from lerobot_training.data import (
    PolicyDataset,
    StepBatchSampler,
    dataset_features,
    dataset_roots,
    open_reader,
    relative_action_stats,
    split_episodes,
    to_policy_batch,
    training_stats,
)
from lerobot_training.distributed import (
    DistributedContext,
    data_parallel,
    destroy_process_group,
    global_mean,
    init_process_group,
    process_group_failure,
    rank_seed,
)
from lerobot_training.errors import CheckpointError, FeatureMismatchError, PolicyConfigError, TrainingError
from lerobot_training.evaluation import (
    DEFAULT_ENV_FACTORY,
    accepts_argument,
    evaluate,
    evaluate_vector,
    find_env_factory,
)
from lerobot_training.features import ACTION, FeatureType
from lerobot_training.policies.base import Policy
from lerobot_training.policies.registry import policy_class
from lerobot_training.relative_actions import STATE_KEY, RelativeActions
from lerobot_training.training_state import load_training_state, save_training_state
from lerobot_training.transforms import ImageTransforms, ImageTransformsConfig

LOG_COLUMNS = (
    "step", "split", "loss", "l1_loss", "kld_loss", "mse_loss", "lr", "grad_norm", "samples_per_s", "data_s",
    "compute_s", "success_rate",
)  # fmt: skip


@dataclass
class TrainConfig:
    """Settings of one training run (`lerobot-ros train` flags)."""

    dataset: Path | list[Path]  # one dataset folder, or several trained on together (same features and fps)
    policy: str
    out: Path
    steps: int = 1000
    batch_size: int = 8
    lr: float | None = None  # None: the policy config's optimizer_lr
    weight_decay: float | None = None
    warmup_steps: int = 100
    decay_steps: int | None = None  # cosine decay length; None: `steps`
    min_lr_ratio: float = 0.1
    grad_clip_norm: float = 10.0
    seed: int = 1000
    val_fraction: float = 0.1
    val_every: int = 100
    val_batches: int = 8
    save_every: int = 500
    log_every: int = 10
    num_workers: int = 0
    device: str = "auto"
    threads: int | None = None  # torch intra-op threads; None: torch's default
    policy_overrides: dict[str, Any] = field(default_factory=dict)
    input_features: list[str] | None = None
    image_stats: str = "dataset"
    augment: bool = False  # LeRobot's default image transforms, enabled
    image_transforms: dict[str, Any] | None = None  # LeRobot's ImageTransformsConfig as JSON (transforms.py)
    cache_decoded_mb: int = 512
    pretrained_backbone: Path | None = None
    eval_every: int = 0
    eval_episodes: int = 5
    eval_max_steps: int = 300
    eval_env: str = DEFAULT_ENV_FACTORY
    eval_env_kwargs: dict[str, Any] = field(default_factory=dict)
    # Envs the evaluation steps at once (spawned workers); None: one per core for the default in-process sim,
    # 1 (serial, in this process) for another --eval-env, which may share outside state (RosRobotEnv: one bridge).
    eval_num_envs: int | str | None = None
    # Joints whose targets are action - state at the frame; [] = every action joint but the gripper; None = off.
    relative_actions: list[str] | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        roots = dataset_roots(self.dataset)
        if not roots:
            raise PolicyConfigError("dataset is empty; give at least one dataset folder")
        self.dataset = roots[0] if len(roots) == 1 else roots
        self.out = Path(self.out)
        policy_class(self.policy, "--policy")
        for name in ("steps", "batch_size", "save_every", "log_every", "val_every", "val_batches"):
            if getattr(self, name) < 1:
                raise PolicyConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps < 0 or self.num_workers < 0 or self.eval_every < 0:
            raise PolicyConfigError("warmup_steps, num_workers and eval_every must be >= 0")
        self.transforms_config()  # validates image_transforms
        envs = self.eval_num_envs
        if envs is not None and envs != "auto" and (not isinstance(envs, int) or isinstance(envs, bool) or envs < 1):
            raise PolicyConfigError(f"eval_num_envs must be a number >= 1 or 'auto', got {self.eval_num_envs!r}")
        if self.relative_actions is not None and not (
            isinstance(self.relative_actions, list) and all(isinstance(j, str) for j in self.relative_actions)
        ):
            raise PolicyConfigError(f"relative_actions must be a list of joint names, got {self.relative_actions!r}")
        if self.image_stats not in ("dataset", "imagenet"):
            raise PolicyConfigError(f"image_stats must be 'dataset' or 'imagenet', got {self.image_stats!r}")

    @property
    def datasets(self) -> list[Path]:
        """The dataset folders of this run (one or several)."""
        return dataset_roots(self.dataset)

    def transforms_config(self) -> ImageTransformsConfig:
        """The camera transforms of this run: `image_transforms`, else LeRobot's defaults (enabled by `augment`)."""
        if self.image_transforms is not None:
            return ImageTransformsConfig.from_json(self.image_transforms, "image_transforms")
        return ImageTransformsConfig(enable=self.augment)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, Path):
                out[key] = str(value)
            elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
                out[key] = [str(v) for v in value]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CheckpointError(f"train_config.json has unknown fields {unknown}; was it written by a newer version?")
        values = dict(data)
        if values.get("pretrained_backbone"):
            values["pretrained_backbone"] = Path(values["pretrained_backbone"])
        return cls(**values)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def lr_lambda(warmup_steps: int, decay_steps: int, min_ratio: float) -> Callable[[int], float]:
    """Linear warm-up to 1, then cosine decay to `min_ratio` at `decay_steps` (held after)."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        progress = min(1.0, (step - warmup_steps) / max(1, decay_steps - warmup_steps))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def _checkpoint_dirs(out: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (state.json is written last, so it marks completeness)."""
    root = out / "checkpoints"
    if not root.is_dir():
        return []
    complete = [p for p in root.iterdir() if p.name.isdigit() and (p / "training_state" / "state.json").is_file()]
    return sorted(complete, key=lambda p: int(p.name))


def last_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint's `pretrained_model` directory of a run, if any."""
    checkpoints = _checkpoint_dirs(out)
    return checkpoints[-1] / "pretrained_model" if checkpoints else None


def resume_directory(config: TrainConfig, resume: bool, check_out: bool = True) -> Path | None:
    """The checkpoint a resumed run continues from (None for a new run); CheckpointError when there is none, and
    (`check_out`) TrainingError when a new run's `out` already holds one."""
    if resume:
        checkpoints = _checkpoint_dirs(config.out)
        if not checkpoints:
            raise CheckpointError(f"--resume: {config.out / 'checkpoints'} holds no checkpoint to resume from")
        return checkpoints[-1]
    if check_out and (config.out / "checkpoints").exists():
        raise TrainingError(f"{config.out} already holds a run; pass --resume to continue it or choose another --out")
    return None


def relative_actions_of(config: TrainConfig, reader: Any) -> RelativeActions | None:
    """The run's relative-action joints resolved against the dataset's names (None when off)."""
    joints = config.relative_actions
    if joints is None:
        return None
    features = reader.features
    if STATE_KEY not in features:
        raise FeatureMismatchError(
            f"--relative-actions needs the dataset's {STATE_KEY!r} feature (targets are action - state at the "
            f"frame); dataset {reader.root} has none"
        )
    inputs = config.input_features
    if inputs is not None and STATE_KEY not in inputs:
        raise PolicyConfigError(
            f"--relative-actions needs {STATE_KEY!r} among the policy inputs (inference adds it back); "
            f"add --feature {STATE_KEY}"
        )
    action, state = features.get(ACTION), features[STATE_KEY]
    return RelativeActions.choose(
        action.names if action is not None else None, state.names, joints, state_key=STATE_KEY
    )


def policy_config_of(config: TrainConfig, reader: Any) -> Any:
    """The policy config of a new run: `--set` fields and the dataset's features (errors name the field)."""
    cls = policy_class(config.policy, "--policy")
    inputs, outputs = dataset_features(reader, config.input_features)
    fields: dict[str, Any] = {
        **config.policy_overrides,
        "input_features": {k: v.to_json() for k, v in inputs.items()},
        "output_features": {k: v.to_json() for k, v in outputs.items()},
    }
    if config.pretrained_backbone is not None:  # recorded in config.json as where the backbone started
        fields["pretrained_backbone_weights"] = str(config.pretrained_backbone)
    return cls.config_class.from_dict(fields)


def eval_num_envs_of(config: TrainConfig) -> int:
    """How many envs the periodic evaluation runs at once (`eval_num_envs`, checked against this machine)."""
    from lerobot_ros.vector_env import AUTO, choose_num_envs

    requested = config.eval_num_envs
    if requested is None:
        requested = AUTO if config.eval_env == DEFAULT_ENV_FACTORY else 1
    try:
        return int(choose_num_envs(requested, config.eval_episodes, option="--eval-num-envs"))
    except ValueError as err:
        raise PolicyConfigError(str(err)) from None


def preflight(config: TrainConfig, resume: bool) -> None:
    """The checks of the run's settings a `Trainer` makes before it trains, without building the model: the run
    directory, the datasets, the relative actions, the policy config, the evaluation envs. `lerobot-ros train
    --nproc` runs them before torchrun starts, so that a bad setting is one line, not one per rank."""
    resume_directory(config, resume)
    reader = open_reader(config.datasets)
    try:
        relative_actions_of(config, reader)
        if not resume:
            policy_config_of(config, reader)
    finally:
        reader.close()
    if config.eval_every:
        eval_num_envs_of(config)


class Trainer:
    """Builds the data, the policy and the optimiser from a `TrainConfig` and runs the loop."""

    def __init__(
        self, config: TrainConfig, *, resume: bool = False, write: Callable[[str], None] | None = None
    ) -> None:
        self.config = config
        self.resume = resume
        self.dist = DistributedContext.from_env()
        self.write = (write or (lambda _line: None)) if self.dist.is_main else (lambda _line: None)
        self.device = self.dist.device(resolve_device(config.device))
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        init_process_group(self.dist, self.device)
        self.step = 0
        self._resume_dir = resume_directory(config, resume, check_out=self.dist.is_main)
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        reader = open_reader(config.datasets)
        self.fps = reader.fps
        self.contract = self._dataset_contract(reader)
        self.relative_actions = relative_actions_of(config, reader)
        self.train_episodes, self.val_episodes = split_episodes(reader.num_episodes, config.val_fraction, config.seed)
        if self._resume_dir is not None:
            loaded = load_policy(self._resume_dir / "pretrained_model", device=self.device)
            self.policy = loaded.policy
            if self.policy.name != config.policy:
                raise CheckpointError(f"{self._resume_dir} holds a {self.policy.name} policy, not {config.policy}")
            if self.policy.relative_actions != self.relative_actions:
                raise CheckpointError(f"{self._resume_dir}: its relative actions differ from this run's settings")
        else:
            self.policy = self._build_policy(reader)
        self.policy.relative_actions = self.relative_actions
        reader.close()
        self.policy.to(self.device).train()
        self.model = data_parallel(self.policy, self.dist, self.device)  # rank 0's weights and statistics win
        if self.dist.enabled and self._resume_dir is None:
            torch.manual_seed(rank_seed(config.seed, self.dist))
        self.camera_keys = [k for k, ft in self.policy.config.input_features.items() if ft.type is FeatureType.VISUAL]
        cache = config.cache_decoded_mb * 2**20
        transforms = ImageTransforms(config.transforms_config())
        augmentation = transforms if transforms.active else None
        self.train_set = PolicyDataset(
            config.datasets, self.train_episodes, self.policy.config, augmentation=augmentation, cache_bytes=cache,
            relative_actions=self.relative_actions,
        )  # fmt: skip
        self.val_set = (
            PolicyDataset(
                config.datasets,
                self.val_episodes,
                self.policy.config,
                cache_bytes=cache,
                relative_actions=self.relative_actions,
            )
            if self.val_episodes
            else None
        )
        lr = config.lr if config.lr is not None else float(getattr(self.policy.config, "optimizer_lr", 1e-4))
        weight_decay = config.weight_decay
        if weight_decay is None:
            weight_decay = float(getattr(self.policy.config, "optimizer_weight_decay", 1e-4))
        self.optimizer = torch.optim.AdamW(
            [p for p in self.policy.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay
        )
        decay_steps = config.decay_steps or config.steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(config.warmup_steps, decay_steps, config.min_lr_ratio)
        )
        if self._resume_dir is not None:
            state = load_training_state(self._resume_dir / "training_state", self.optimizer, self.scheduler)
            self.step = int(state["step"])
            if state.get("train_episodes") != self.train_episodes:
                raise CheckpointError(
                    f"{self._resume_dir}: the train/validation split differs from this run's (seed or dataset changed)"
                )
        self._env: Any = None
        self._env_is_vector = False
        if config.eval_every:
            self.eval_num_envs()  # more envs than this machine holds: refused before training starts

    @staticmethod
    def _dataset_contract(reader: Any) -> dict[str, Any] | None:
        """The robot contract the dataset's writer stored in meta/contract.json, if any."""
        path = Path(reader.root) / "meta" / "contract.json"
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
        except ValueError as err:
            raise TrainingError(f"{path} is not valid JSON: {err}") from None
        return data if isinstance(data, dict) else None

    def _build_policy(self, reader: Any) -> Policy:
        config = self.config
        cls = policy_class(config.policy, "--policy")
        policy_config = policy_config_of(config, reader)
        inputs, outputs = dataset_features(reader, config.input_features)
        if not self.dist.is_main:  # rank 0 computes the statistics; DDP broadcasts them with the weights
            return cls(policy_config)
        stats = training_stats(reader, self.train_episodes, {**inputs, **outputs}, image_stats=config.image_stats)
        if self.relative_actions is not None:
            stats[ACTION] = relative_action_stats(
                reader, self.train_episodes, self.relative_actions, policy_config.action_delta_indices
            )
        policy = cls(policy_config, stats)
        backbone = getattr(policy_config, "pretrained_backbone_weights", None)
        if backbone:
            policy.load_pretrained_backbone(Path(backbone))
        return policy

    def _loader(self, dataset: PolicyDataset, sampler: StepBatchSampler) -> DataLoader[dict[str, Tensor]]:
        workers = self.config.num_workers
        return DataLoader(
            dataset,
            batch_sampler=sampler,
            num_workers=workers,
            pin_memory=self.device.type == "cuda",
            persistent_workers=False,
            prefetch_factor=4 if workers else None,
            generator=torch.Generator().manual_seed(self.config.seed),
        )

    def validation_loss(self) -> float | None:
        """Mean loss over up to `val_batches` fixed batches of the validation episodes (RNG isolated)."""
        if self.val_set is None:
            return None
        config = self.config
        batches = min(config.val_batches, math.ceil(len(self.val_set) / config.batch_size))
        sampler = StepBatchSampler(len(self.val_set), config.batch_size, config.seed + 1, 0, batches)
        losses = []
        self.policy.eval()
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []), torch.no_grad():
            torch.manual_seed(config.seed + 1)
            for batch in self._loader(self.val_set, sampler):
                loss, _ = self.policy.compute_loss(to_policy_batch(batch, self.camera_keys, self.device))
                losses.append(float(loss))
        self.policy.train()
        return sum(losses) / len(losses)

    def _evaluate(self) -> float | None:
        """Success rate in the simulation, or None (with one line written) when it cannot run."""
        config = self.config
        try:
            if self._env is None:
                factory = find_env_factory(config.eval_env)
                if factory is None:
                    self.write(
                        f"sim evaluation skipped: {config.eval_env} is not available (is the sim bridge installed?)"
                    )
                    config.eval_every = 0
                    return None
                kwargs = dict(config.eval_env_kwargs)
                contract_path = config.datasets[0] / "meta" / "contract.json"
                if "contract" not in kwargs and contract_path.is_file() and accepts_argument(factory, "contract"):
                    kwargs["contract"] = str(contract_path)
                if "features" not in kwargs and accepts_argument(factory, "features"):
                    kwargs["features"] = list(self.policy.config.input_features)  # no camera the policy ignores
                num_envs = self.eval_num_envs()
                if num_envs > 1:
                    from lerobot_ros.vector_env import make_vector_env

                    self.write(f"sim evaluation: {config.eval_episodes} episodes on {num_envs} envs at a time")
                    self._env = make_vector_env(num_envs, functools.partial(factory, **kwargs))
                else:
                    self._env = factory(**kwargs)
                self._env_is_vector = num_envs > 1
            run = evaluate_vector if self._env_is_vector else evaluate
            result = run(self.policy, self._env, config.eval_episodes, config.eval_max_steps, config.seed)
        except Exception as err:  # a simulator failure must not end a long training run; it is reported
            self.write(f"sim evaluation at step {self.step} failed: {type(err).__name__}: {err}")
            return None
        return result.success_rate

    def eval_num_envs(self) -> int:
        """How many envs the periodic evaluation runs at once (`eval_num_envs`, checked against this machine)."""
        return eval_num_envs_of(self.config)

    def close_eval_env(self) -> None:
        """Stop the evaluation's env (its workers, when it runs several)."""
        env, self._env = self._env, None
        if env is not None and hasattr(env, "close"):
            env.close()

    def save_checkpoint(self) -> Path:
        directory = self.config.out / "checkpoints" / f"{self.step:06d}"
        save_policy(
            directory / "pretrained_model",
            self.policy,
            fps=float(self.fps),
            contract=self.contract,
            extra={
                "dataset": str(self.config.datasets[0]),
                "datasets": [str(root) for root in self.config.datasets],
                "train_episodes": self.train_episodes,
                "step": self.step,
                "image_transforms": self.config.transforms_config().to_json(),
            },
        )
        save_training_state(
            directory / "training_state", self.optimizer, self.scheduler, self.step,
            {"train_episodes": self.train_episodes, "val_episodes": self.val_episodes},
        )  # fmt: skip
        last = self.config.out / "checkpoints" / "last"
        tmp = last.with_name(".last.tmp")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(directory.name)
        tmp.replace(last)
        return directory

    def _open_log(self) -> tuple[Any, Any]:
        path = self.config.out / "log.csv"
        rows: list[dict[str, str]] = []
        if self.resume and path.is_file():
            with path.open(newline="") as handle:
                rows = [row for row in csv.DictReader(handle) if int(row["step"]) <= self.step]
        handle = path.open("w", newline="")
        writer = csv.DictWriter(handle, fieldnames=LOG_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
        handle.flush()
        return handle, writer

    def _batches(self) -> Iterator[dict[str, Tensor]]:
        config = self.config
        sampler = StepBatchSampler(
            len(self.train_set), config.batch_size, config.seed, self.step, config.steps, self.dist.rank,
            self.dist.world_size,
        )  # fmt: skip
        yield from self._loader(self.train_set, sampler)

    def train(self) -> Path:
        """Run to `config.steps`; returns the final checkpoint's `pretrained_model` directory.

        In a distributed run every rank trains; rank 0 alone logs, validates, evaluates and saves.
        """
        try:
            if self.dist.is_main:
                return self._train_main()
            self._train_worker()
            return self.config.out / "checkpoints" / f"{self.config.steps:06d}" / "pretrained_model"
        except RuntimeError as err:
            lost = process_group_failure(err, self.dist)
            if lost is None:
                raise
            raise lost from None
        finally:
            self.close_eval_env()
            destroy_process_group()

    def _logs_step(self, step: int) -> bool:
        """Whether step `step` (counted from 1) is written to the log."""
        return step % self.config.log_every == 0 or step == self.config.steps

    def _optimisation_step(self, batch: dict[str, Tensor]) -> tuple[float, dict[str, float], Tensor]:
        """One step; the loss and its parts are the global batch's on logged steps (every rank joins that
        all-reduce), this rank's own on the others."""
        loss, logs = self.model(to_policy_batch(batch, self.camera_keys, self.device))
        if not torch.isfinite(loss):
            where = f" on rank {self.dist.rank}" if self.dist.enabled else ""
            raise TrainingError(
                f"the loss became {float(loss.detach())} at step {self.step + 1}{where}; lower --lr or "
                "--grad-clip-norm, or check the dataset for NaN values"
            )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.grad_clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        value = float(loss.detach())
        if self.dist.enabled and self._logs_step(self.step):
            keys = sorted(logs)
            count = len(next(iter(batch.values())))
            value, *parts = global_mean([value, *(float(logs[k]) for k in keys)], count, self.device)
            logs = dict(zip(keys, parts, strict=True))
        return value, logs, grad_norm

    def _train_worker(self) -> None:
        for batch in self._batches():
            self._optimisation_step(batch)

    def _train_main(self) -> Path:
        config = self.config
        config.out.mkdir(parents=True, exist_ok=True)
        write_atomic(config.out / "train_config.json", (json.dumps(config.to_json(), indent=2) + "\n").encode())
        handle, log = self._open_log()
        progress = None
        if config.progress:
            from lerobot_ros.progress import progress_bar

            progress = progress_bar(f"train {config.policy}", "step", total=config.steps, initial=self.step)
        final = None
        try:
            window_samples, window_data, window_compute = 0, 0.0, 0.0
            fetched = time.perf_counter()
            for batch in self._batches():
                started = time.perf_counter()
                data_s = started - fetched
                loss, logs, grad_norm = self._optimisation_step(batch)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                fetched = time.perf_counter()
                window_samples += config.batch_size * self.dist.world_size
                window_data += data_s
                window_compute += fetched - started
                if self._logs_step(self.step):
                    throughput = window_samples / max(window_data + window_compute, 1e-9)
                    log.writerow({
                        "step": self.step, "split": "train", "loss": f"{loss:.6g}",
                        **{k: f"{v:.6g}" for k, v in logs.items() if k in LOG_COLUMNS},
                        "lr": f"{self.scheduler.get_last_lr()[0]:.6g}", "grad_norm": f"{float(grad_norm):.6g}",
                        "samples_per_s": f"{throughput:.4g}", "data_s": f"{window_data:.4g}",
                        "compute_s": f"{window_compute:.4g}",
                    })  # fmt: skip
                    if progress is not None:
                        progress.set_postfix(loss=f"{loss:.4f}", samples_s=f"{throughput:.1f}")
                    window_samples, window_data, window_compute = 0, 0.0, 0.0
                if self.step % config.val_every == 0 or self.step == config.steps:
                    val = self.validation_loss()
                    if val is not None:
                        log.writerow({"step": self.step, "split": "val", "loss": f"{val:.6g}"})
                if config.eval_every and (self.step % config.eval_every == 0 or self.step == config.steps):
                    rate = self._evaluate()
                    if rate is not None:
                        log.writerow({"step": self.step, "split": "eval", "success_rate": f"{rate:.4g}"})
                if self.step % config.save_every == 0 or self.step == config.steps:
                    final = self.save_checkpoint()
                    handle.flush()
                if progress is not None:
                    progress.update(1)
                fetched = time.perf_counter()
        finally:
            handle.close()
            if progress is not None:
                progress.close()
        from lerobot_training.curves import plot_curves

        plot_curves(config.out / "log.csv", config.out / "curves.png")
        if final is None:
            final = _checkpoint_dirs(config.out)[-1]
        return final / "pretrained_model"
