"""Stage 2, `lerobot-ros demo train`: ACT on the demo dataset, on CPU, resumable.

Inputs are the joint positions and the block/goal positions (`observation.environment_state`), which a small
ACT learns in minutes on two cores; the camera stays in the dataset (and in the report's GIF). A run that
already reached the asked number of steps is kept; a shorter one continues from its last checkpoint; a run
trained on fewer episodes than the dataset now holds starts again from scratch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lerobot_eval.demo.workspace import DemoLayout, DemoSettings, recorded_episodes, trained_step
from lerobot_ros.command import CommandError

if TYPE_CHECKING:
    from lerobot_training.trainer import TrainConfig

# One torch thread: this small model gains little from a second one on an idle machine, and with two threads any
# other load on the cores makes them wait on each other (measured here: 20x slower steps beside a benchmark).
THREADS = 1


def train(layout: DemoLayout, settings: DemoSettings, say: Callable[[str], None], restart: bool = False) -> Path:
    """Train (or continue training) until `settings.train_steps`; returns the checkpoint directory."""
    import shutil

    from lerobot_dataset import DatasetError
    from lerobot_training.errors import TrainingError
    from lerobot_training.trainer import TrainConfig, Trainer

    episodes = recorded_episodes(layout)
    if episodes == 0:
        raise CommandError(f"no dataset in {layout.dataset}; run `lerobot-ros demo record` first")
    saved = layout.train / "train_config.json"
    trained_on = _trained_episodes(layout)
    if layout.train.exists() and (restart or (trained_on is not None and trained_on != episodes)):
        why = "--restart" if restart else f"the run used {trained_on} episodes, the dataset now has {episodes}"
        say(f"train: {why}: training again from scratch (removing {layout.train})")
        shutil.rmtree(layout.train)
    step = trained_step(layout)
    if step >= settings.train_steps:
        say(f"train: {layout.checkpoint} is at step {step} (asked for {settings.train_steps}); nothing to do")
        return layout.checkpoint
    try:
        if saved.is_file():
            say(f"train: resuming {layout.train} from step {step} to {settings.train_steps}")
            saved_config = json.loads(saved.read_text())
            config = TrainConfig.from_json({**saved_config, "steps": settings.train_steps, "threads": THREADS})
            resume = True
        else:
            say(
                f"train: ACT on {episodes} episodes, inputs {', '.join(settings.features)}, {settings.train_steps} "
                f"steps of {settings.batch_size} -> {layout.train}"
            )
            config = train_config(settings, layout.dataset, layout.train)
            resume = False
        return Path(Trainer(config, resume=resume, write=say).train())
    except (TrainingError, DatasetError) as err:
        raise CommandError(str(err)) from None


def train_config(settings: DemoSettings, dataset: Path, out: Path) -> TrainConfig:
    """The demo's training run on `dataset` into `out` (checkpoints at each quarter of the steps)."""
    from lerobot_training.trainer import TrainConfig

    return TrainConfig(
        dataset=dataset,
        policy="act",
        out=out,
        steps=settings.train_steps,
        batch_size=settings.batch_size,
        seed=settings.train_seed,
        input_features=list(settings.features),
        policy_overrides=dict(settings.policy_overrides),
        save_every=max(settings.train_steps // 4, 1),
        val_every=max(settings.train_steps // 10, 1),
        log_every=max(min(settings.train_steps // 50, 50), 1),
        val_fraction=0.1,
        threads=THREADS,
    )


def _trained_episodes(layout: DemoLayout) -> int | None:
    """Episodes of the dataset the existing run used (train + validation), None when there is no run."""
    state = layout.train / "checkpoints" / "last" / "training_state" / "state.json"
    if not state.is_file():
        return None
    split = json.loads(state.read_text())
    train_episodes = split.get("train_episodes")
    val_episodes = split.get("val_episodes")
    if train_episodes is None or val_episodes is None:
        return None
    return len(train_episodes) + len(val_episodes)
