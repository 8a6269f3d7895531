"""Where the demo keeps its results, its default settings, and how far each stage got (pure: no ROS, no torch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TASK = "pick up the cube and place it in the bin"
STATE = "observation.state"
ENV_STATE = "observation.environment_state"


@dataclass(frozen=True)
class DemoSettings:
    """What the demo records, trains and evaluates; the defaults fit in 10 minutes on 2 idle CPU cores."""

    episodes: int = 100
    seed: int = 0
    task: str = TASK
    max_episode_s: float = 30.0
    codec: str = "h264"
    # Simulated seconds per wall second at most while recording (lockstep; 0 = as fast as the expert answers: the
    # frames are the same at any speed, each one simulation step).
    record_real_time_factor: float = 0.0
    train_steps: int = 6000
    batch_size: int = 32
    train_seed: int = 1000
    features: tuple[str, ...] = (STATE, ENV_STATE)
    # A small ACT for CPU: no VAE (the scripted expert is deterministic), 1 s chunks; about 750 samples/s on one thread.
    policy_overrides: dict[str, Any] = field(
        default_factory=lambda: {
            "dim_model": 128,
            "dim_feedforward": 512,
            "n_encoder_layers": 2,
            "use_vae": False,
            "dropout": 0.0,
            "chunk_size": 30,
            "n_action_steps": 30,
            "optimizer_lr": 3e-4,
        }
    )
    eval_episodes: int = 20
    eval_seed: int = 1000
    eval_max_s: float = 20.0
    gif_episodes: int = 1
    # The real-time evaluation's sim loop and executor tick SCHED_FIFO where permitted (lerobot_ros.realtime).
    eval_realtime: bool = True

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["features"] = list(self.features)
        return out


@dataclass(frozen=True)
class DemoLayout:
    """The demo's work folder: one sub-folder per stage."""

    root: Path

    @property
    def dataset(self) -> Path:
        return self.root / "dataset"

    @property
    def record_summary(self) -> Path:
        """The record stage's summary of the dataset (record.json)."""
        return self.root / "record.json"

    @property
    def timings(self) -> Path:
        """Wall seconds spent per stage, summed over runs (timings.json)."""
        return self.root / "timings.json"

    @property
    def record_log(self) -> Path:
        """Per-episode outcomes of the recording (JSON lines, appended as episodes are saved)."""
        return self.root / "record_episodes.jsonl"

    @property
    def train(self) -> Path:
        return self.root / "train"

    @property
    def checkpoint(self) -> Path:
        return self.train / "checkpoints" / "last" / "pretrained_model"

    @property
    def eval(self) -> Path:
        return self.root / "eval"

    @property
    def eval_log(self) -> Path:
        """Per-episode results of the evaluation (JSON lines, appended as episodes end)."""
        return self.eval / "episodes.jsonl"

    @property
    def chunk_log(self) -> Path:
        """One JSON line per action chunk the evaluation saw (latency, inference time)."""
        return self.eval / "chunks.jsonl"

    @property
    def eval_summary(self) -> Path:
        return self.eval / "eval.json"

    @property
    def report(self) -> Path:
        return self.root / "report"


def read_json(path: Path) -> dict[str, Any]:
    """A stage's JSON object, or {} when the stage has not written it yet."""
    return dict(json.loads(path.read_text())) if path.is_file() else {}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSON-lines file (a line cut off by a crash is ignored)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def append_jsonl(path: Path, rows: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> None:
    """Append rows, each on its own line, flushed (a crash loses at most the line being written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
            out.flush()


def recorded_episodes(layout: DemoLayout) -> int:
    """Episodes committed to the demo dataset (0 when there is none yet)."""
    info = layout.dataset / "meta" / "info.json"
    if not info.is_file():
        return 0
    return int(json.loads(info.read_text()).get("total_episodes", 0))


def trained_step(layout: DemoLayout) -> int:
    """Step of the newest complete checkpoint of the demo's training run (0 when there is none)."""
    from lerobot_training.checkpoint import read_metadata

    config = layout.checkpoint / "config.json"
    if not config.is_file() or not (layout.checkpoint / "model.safetensors").is_file():
        return 0
    return int(read_metadata(layout.checkpoint).get("step", 0))


def checkpoint_id(layout: DemoLayout) -> str:
    """A fingerprint of the current checkpoint's weights (evaluations of another checkpoint are stale)."""
    import hashlib

    weights = layout.checkpoint / "model.safetensors"
    if not weights.is_file():
        return ""
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:16]


def evaluated_episodes(layout: DemoLayout) -> list[dict[str, Any]]:
    """Evaluation episodes already run, in order."""
    return read_jsonl(layout.eval_log)
