"""Real-time chunking against replace / crossfade / ensemble under injected inference delays (one run, in-process).

Two tasks (`--task`), both closed loop on a simulated clock at 30 Hz with a diffusion policy of this repo:

* `so101` (default): the SO-101 pick-and-place simulation (`rtc_so101.py`). The scripted expert records 200
  demonstrations in this process (`bench_demo_curve.record`: the demo contract's low-dim features, joints in
  LeRobot units + block/goal positions, no camera) and the policy (U-Net 32/64/128, 32-step chunks, DDIM 10
  steps, one torch thread) is trained on them with the repo's `Trainer`. On this 2-core machine a whole run
  took 13.5 min at load 7-8 (recording 130 s, 4500 training steps 477 s, 300 episodes 184 s); training took
  16 min at load 10-17. Success is the sim's (the block in the bin) within 10 s; the executor's targets
  (radians, through the contract's units) are the joint commands. Table in the policy node README.
* `toy`: a bimodal task: a 2-D point arm (position servo, first-order lag) must go around a round obstacle to a
  goal, above or below (the expert picks either at random: the multimodality that makes independently sampled
  chunks disagree); success is reaching the goal (within 0.08) before 6 s without touching the obstacle.

`--checkpoint DIR` keeps the trained policy for the next run (reused when it exists). In each episode the real
`ChunkExecutor` (each blend mode) produces the commands; inference starts the way the policy node schedules it
(at the latest when `threshold` of the chunk is left, or the delay + margin) and its chunk arrives `delay`
seconds of simulated time after its observation, so the robot keeps executing the previous chunk meanwhile.
With rtc the policy gets what the node hands it: the previous chunk's remaining steps on the observation's
grid (`core/rtc.py`), d measured as the node does (observation age 0 + delay + margin), s from the schedule,
beta 5, through `CheckpointPolicy`; `rtc` samples from pure noise as the paper, `rtc_warm0.5` starts from the
previous chunk at half the noise.

Per blend mode and delay (0.1 / 0.2 / 0.4 s), same seeds for every mode:
* seam: the largest command step from the tick before a chunk arrives to two ticks after it (rtc: the step
  into the first inpainted action is among them), divided by the median step elsewhere (1 = no seam);
* jerk: RMS of the third difference of the command stream (units/s^3; rad/s^3 on the SO-101), from 4 ticks
  after the first chunk arrived (the start-up from the resting pose is left out of both); on the SO-101 both
  on the five arm joints (the expert switches the gripper in one tick, inside chunks as much as at seams);
* success, and why the others failed (timeout, collision, the sim terminating the episode).

Writes bench/results/rtc_so101.json (toy: rtc.json) and a plot beside it.

    .venv/bin/python bench/bench_rtc.py [--task so101|toy] [--episodes 10] [--train-steps N] [--checkpoint DIR]
        [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from headline import figure

from lerobot_contract.time import NS
from lerobot_policy_node.core.executor import BlendMode, Chunk, ChunkExecutor, ExecutorConfig
from lerobot_policy_node.core.policies import CheckpointPolicy
from lerobot_policy_node.core.rtc import RtcSettings, make_prefix, measured_delay_steps, remaining_steps
from lerobot_training.checkpoint import save_policy
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.diffusion import DiffusionConfig, DiffusionPolicy

RESULTS = Path(__file__).resolve().parent / "results" / "rtc.json"
FPS = 30
PERIOD_NS = NS // FPS
HORIZON = 32
SPEED = 0.9  # units/s along the expert path
VIA_Y = 0.7
OBSTACLE_RADIUS = 0.3
GOAL_TOLERANCE = 0.08
EPISODE_S = 6.0
SERVO_GAIN = 0.6  # fraction of the distance to the target covered per tick
THRESHOLD = 0.5
MARGIN_S = 0.03
DELAYS = (0.1, 0.2, 0.4)
# (label, executor blend, rtc start_noise_level): rtc as in the paper (from pure noise), and warm-started.
WARM_LEVEL = 0.5
MODES = (
    ("replace", BlendMode.REPLACE, 1.0),
    ("crossfade", BlendMode.CROSSFADE, 1.0),
    ("ensemble", BlendMode.ENSEMBLE, 1.0),
    ("rtc", BlendMode.RTC, 1.0),
    (f"rtc_warm{WARM_LEVEL:g}", BlendMode.RTC, WARM_LEVEL),
)
NAMES = ("x", "y")


def expert_path(start: np.ndarray, goal: np.ndarray, side: float, distances: np.ndarray) -> np.ndarray:
    """Points at arc lengths `distances` along start -> (0, side * VIA_Y) -> goal (clamped at the goal)."""
    via = np.array([0.0, side * VIA_Y])
    first, second = np.linalg.norm(via - start), np.linalg.norm(goal - via)
    d = np.clip(distances, 0.0, first + second)[..., None]
    on_first = start + (via - start) * np.minimum(d / first, 1.0)
    on_second = via + (goal - via) * np.clip((d - first) / second, 0.0, 1.0)
    return np.where(d <= first, on_first, on_second)


def sample_episode(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    start = np.array([-1.0, 0.0]) + rng.uniform(-0.1, 0.1, 2)
    goal = np.array([1.0, 0.0]) + rng.uniform(-0.1, 0.1, 2)
    return start, goal


def training_batch(rng: np.random.Generator, size: int) -> dict[str, torch.Tensor]:
    states, goals, chunks = [], [], []
    step = SPEED / FPS
    for _ in range(size):
        start, goal = sample_episode(rng)
        side = rng.choice([-1.0, 1.0])
        # Half the samples at the start line, where both sides are right: the decision the policy must make.
        progress = 0.0 if rng.random() < 0.3 else rng.uniform(0.0, 2.6)
        points = expert_path(start, goal, side, progress + step * np.arange(HORIZON))
        states.append(points[0])
        goals.append(goal)
        chunks.append(points)
    return {
        "observation.state": torch.tensor(np.array(states), dtype=torch.float32),
        "observation.environment_state": torch.tensor(np.array(goals), dtype=torch.float32),
        "action": torch.tensor(np.array(chunks), dtype=torch.float32),
        "action_is_pad": torch.zeros(size, HORIZON, dtype=torch.bool),
    }


def train_policy(steps: int, directory: Path, seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (2,), NAMES),
        "observation.environment_state": PolicyFeature(FeatureType.ENV, (2,)),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (2,), NAMES)}
    config = DiffusionConfig(
        input_features=inputs, output_features=outputs, n_obs_steps=1, horizon=HORIZON, n_action_steps=16,
        down_dims=(32, 64, 128), n_groups=8, kernel_size=5, diffusion_step_embed_dim=32, num_inference_steps=10,
    )  # fmt: skip
    span = {"min": torch.tensor([-1.2, -1.0]), "max": torch.tensor([1.2, 1.0])}
    stats = {
        "observation.state": span,
        "action": span,
        "observation.environment_state": {"min": torch.tensor([0.85, -0.15]), "max": torch.tensor([1.15, 0.15])},
    }
    policy = DiffusionPolicy(config, stats)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=2e-3, weight_decay=1e-6)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    began, losses = time.perf_counter(), []
    for _ in range(steps):
        loss, _ = policy.compute_loss(training_batch(rng, 64))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
    save_policy(directory, policy, fps=FPS)
    return {"steps": steps, "seconds": time.perf_counter() - began, "final_loss": float(np.mean(losses[-100:]))}


class ToyTask:
    """The bimodal 2-D task: a point arm (position servo, first-order lag) goes round a round obstacle to a goal."""

    names = NAMES
    metric_joints = (0, 1)
    episode_s = EPISODE_S
    what = "bimodal 2-D obstacle task, diffusion policy trained in the run, simulated clock (see docstring)"

    def __init__(self) -> None:
        self.position = np.zeros(2)
        self.goal = np.zeros(2)
        self.collided = False
        self.reached = False

    def reset(self, seed: int) -> np.ndarray:
        self.position, self.goal = sample_episode(np.random.default_rng(seed))
        self.collided, self.reached = False, False
        return self.position.copy()

    def observation(self) -> dict[str, np.ndarray]:
        return {"observation.state": self.position.copy(), "observation.environment_state": self.goal.copy()}

    def to_command(self, actions: np.ndarray) -> np.ndarray:
        return actions

    def step(self, target: np.ndarray) -> bool:
        self.position = self.position + SERVO_GAIN * (target - self.position)
        self.collided = self.collided or bool(np.linalg.norm(self.position) < OBSTACLE_RADIUS)
        self.reached = bool(np.linalg.norm(self.position - self.goal) < GOAL_TOLERANCE)
        return self.reached

    def result(self) -> dict[str, Any]:
        success = self.reached and not self.collided
        return {"success": success, "failure": None if success else "collision" if self.collided else "timeout"}

    def close(self) -> None:
        pass


class ClosedLoopTask(Protocol):
    """What `run_episode` drives: `ToyTask` here, `rtc_so101.So101Task` (the SO-101 sim)."""

    names: tuple[str, ...]
    metric_joints: tuple[int, ...]  # the columns of the command the seam and jerk are measured on
    episode_s: float
    what: str

    def reset(self, seed: int) -> np.ndarray: ...  # the resting command (executor units)
    def observation(self) -> dict[str, np.ndarray]: ...  # the policy's inputs now
    def to_command(self, actions: np.ndarray) -> np.ndarray: ...  # policy units -> executor units
    def step(self, target: np.ndarray) -> bool: ...  # one tick's command; True: the episode is over
    def result(self) -> dict[str, Any]: ...  # {"success": bool, "failure": None | why}
    def close(self) -> None: ...


def run_episode(
    policy: CheckpointPolicy,
    task: ClosedLoopTask,
    mode: BlendMode,
    delay_s: float,
    seed: int,
    start_noise_level: float = 1.0,
) -> tuple[dict[str, Any], list[float]]:
    """One closed-loop episode on a simulated clock; returns its metrics and the inference wall times."""
    position = task.reset(seed)
    torch.manual_seed(seed)
    horizon = policy.horizon
    executor = ChunkExecutor(ExecutorConfig(joint_names=task.names, blend=mode, crossfade_s=0.1, ensemble_coeff=0.01))
    executor.reset(position, 0)
    rtc = RtcSettings(max_guidance_weight=5.0, start_noise_level=start_noise_level) if mode is BlendMode.RTC else None
    # (stamp, actions in the policy's units) of the last chunk that arrived: what the node hands an rtc policy.
    last: tuple[int, np.ndarray] | None = None
    pending: tuple[int, int, np.ndarray] | None = None  # (arrival, stamp, actions) of the inference running
    commands, switches, inference_s = [], [], []
    delay_ns = round(delay_s * NS)
    for tick in range(int(task.episode_s * FPS)):
        now = tick * PERIOD_NS
        if pending is not None and now >= pending[0]:
            executor.submit(Chunk(pending[1], PERIOD_NS, task.to_command(pending[2])), now)
            last, pending = (pending[1], pending[2]), None
            switches.append(tick)
        plan = executor.plan
        left_s = 0.0 if last is None else max(last[0] + (horizon - 1) * PERIOD_NS - now, 0) / NS
        lead_s = max(THRESHOLD * horizon / FPS, delay_s + MARGIN_S)
        if pending is None and (plan is None or last is None or left_s <= lead_s):
            observation = task.observation()
            prefix = None
            if rtc is not None and last is not None:
                previous = remaining_steps(last[1], last[0], PERIOD_NS, now)
                prefix = make_prefix(rtc, previous, horizon, measured_delay_steps(0.0, delay_s, MARGIN_S, PERIOD_NS))
            began = time.perf_counter()
            chunk = policy.predict_chunk(observation) if prefix is None else policy.predict_chunk(observation, prefix)
            inference_s.append(time.perf_counter() - began)
            pending = (now + delay_ns, now, chunk)
        target = executor.target(now)
        if target is None:
            target = position.copy()
        commands.append(target.copy())
        if task.step(target):
            break
    return {**task.result(), **_metrics(np.array(commands)[:, list(task.metric_joints)], switches)}, inference_s


def _metrics(commands: np.ndarray, switches: list[int]) -> dict[str, Any]:
    steps = np.linalg.norm(np.diff(commands, axis=0), axis=1)  # steps[i]: command i -> i + 1
    # The command steps from the tick before a chunk arrives to two ticks after: the switch itself, and with rtc
    # the step into the first inpainted action (d is one margin step past the arrival); crossfade's 0.1 s fade.
    # The first chunk's arrival is the start-up (from the resting pose), not a seam between chunks: left out of
    # the seams and of the jerk, which is measured from 4 ticks after it.
    first = switches[0] if switches else len(commands)
    seam_ticks = {t + k for t in switches[1:] for k in range(-1, 3) if 0 <= t + k < len(steps)}
    inner = np.array([s for i, s in enumerate(steps) if i not in seam_ticks and i > first + 3])
    seam = max((float(steps[i]) for i in seam_ticks), default=0.0)
    median_inner = float(np.median(inner)) if len(inner) else 0.0
    jerk = np.diff(commands[first + 4 :], n=3, axis=0) * FPS**3
    return {
        "seam_step": seam,
        "median_inner_step": median_inner,
        "jerk_rms": float(np.sqrt(np.mean(np.sum(jerk**2, axis=1)))) if len(jerk) else 0.0,
        "ticks": len(commands),
    }


def summarize(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    seams = np.array([e["seam_step"] for e in episodes])
    inner = np.array([e["median_inner_step"] for e in episodes])
    ratios = seams / np.maximum(inner, 1e-9)
    return {
        "episodes": len(episodes),
        "success_rate": float(np.mean([e["success"] for e in episodes])),
        "failures": dict(Counter(e["failure"] for e in episodes if e["failure"])),
        "seam_step_mean": float(np.mean(seams)),
        "seam_step_max": float(np.max(seams)),
        "seam_over_median_inner_step_mean": float(np.mean(ratios)),
        "jerk_rms_mean": float(np.mean([e["jerk_rms"] for e in episodes])),
        "ticks_mean": float(np.mean([e["ticks"] for e in episodes])),
    }


def headline_rows(results: list[dict[str, Any]], jerk_unit: str = "units/s^3") -> list[dict[str, Any]]:
    """Seam, jerk and success of both rtc variants against crossfade (the default blend), per delay."""
    rows_out = []
    same = "crossfade (the default blend), same seeds"
    for delay in DELAYS:
        rows = {r["blend"]: r for r in results if r["delay_s"] == delay}
        crossfade = rows["crossfade"]
        for label in ("rtc", f"rtc_warm{WARM_LEVEL:g}"):
            rtc = rows[label]
            rows_out += [
                figure(f"seam / median in-chunk command step, {label}, inference delay {delay:g} s",
                       rtc["seam_over_median_inner_step_mean"], "x",
                       baseline=crossfade["seam_over_median_inner_step_mean"], baseline_what=same,
                       target="<= baseline"),
                figure(f"command jerk RMS, {label}, inference delay {delay:g} s", rtc["jerk_rms_mean"], jerk_unit,
                       baseline=crossfade["jerk_rms_mean"], baseline_what=same, target="<= baseline"),
                figure(f"success rate, {label}, inference delay {delay:g} s", rtc["success_rate"], "fraction",
                       baseline=crossfade["success_rate"], baseline_what=same, target=">= baseline"),
            ]  # fmt: skip
    return rows_out


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    """Success, seam and jerk per blend mode (one group of bars per delay)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label for label, _, _ in MODES]
    panels = (("success_rate", "success rate"), ("seam_over_median_inner_step_mean", "seam / in-chunk step"),
              ("jerk_rms_mean", "command jerk RMS"))  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    width = 0.8 / len(labels)
    for ax, (key, name) in zip(axes, panels, strict=True):
        for i, label in enumerate(labels):
            values = [next(r[key] for r in results if r["blend"] == label and r["delay_s"] == d) for d in DELAYS]
            ax.bar(np.arange(len(DELAYS)) + (i - (len(labels) - 1) / 2) * width, values, width, label=label)
        ax.set_xticks(np.arange(len(DELAYS)), [f"{d:g} s" for d in DELAYS])
        ax.set(xlabel="inference delay", title=name)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=("so101", "toy"), default="so101", help="the SO-101 sim or the 2-D toy")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per blend mode and delay")
    parser.add_argument("--train-steps", type=int, help="training steps (default: so101 2500, toy 2000)")
    parser.add_argument("--quick", action="store_true", help="3 episodes, 300 training steps, so101: 20 demos (smoke)")
    parser.add_argument("--output", type=Path, help="default: bench/results/rtc_so101.json or rtc.json (toy)")
    parser.add_argument("--checkpoint", type=Path, help="keep the trained policy here (reused when it exists)")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.train_steps = 3, 300
    so101 = args.task == "so101"
    if so101:
        import rtc_so101

    steps = args.train_steps or (rtc_so101.TRAIN_STEPS if so101 else 2000)
    output = args.output or (RESULTS.with_name("rtc_so101.json") if so101 else RESULTS)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.checkpoint or Path(tmp) / "pretrained_model"
        if (directory / "config.json").is_file():
            training: dict[str, Any] = {"steps": None, "seconds": 0.0, "final_loss": None}
            if so101 and (directory / rtc_so101.TRAINING_JSON).is_file():
                training = json.loads((directory / rtc_so101.TRAINING_JSON).read_text())
            training["reused"] = str(directory)
        elif so101:
            training = rtc_so101.train_policy(directory, steps, Path(tmp), 20 if args.quick else rtc_so101.DEMOS)
        else:
            training = train_policy(steps, directory)
        print(f"policy: {training}")
        policy = CheckpointPolicy(directory)
        task: ClosedLoopTask = rtc_so101.So101Task() if so101 else ToyTask()
        results: list[dict[str, Any]] = []
        began = time.perf_counter()
        for delay in DELAYS:
            for label, mode, level in MODES:
                episodes, times = [], []
                for index in range(args.episodes):
                    metrics, inference = run_episode(
                        policy, task, mode, delay, seed=1000 + index, start_noise_level=level
                    )
                    episodes.append(metrics)
                    times += inference
                entry = {"blend": label, "start_noise_level": level, "delay_s": delay, **summarize(episodes),
                         "inference_wall_s_mean": float(np.mean(times)), "per_episode": episodes}  # fmt: skip
                results.append(entry)
                print(
                    f"delay {delay:.1f} s {label:12s}: success {entry['success_rate']:.2f}, seam "
                    f"{entry['seam_step_mean']:.4f} ({entry['seam_over_median_inner_step_mean']:.1f}x inner), jerk "
                    f"{entry['jerk_rms_mean']:.1f}, inference {entry['inference_wall_s_mean'] * 1000:.0f} ms",
                    flush=True,
                )
        task.close()
    headline = headline_rows(results, "rad/s^3" if so101 else "units/s^3")
    report = {
        "bench": "rtc_so101" if so101 else "rtc",
        "what": task.what,
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "loadavg_at_end": os.getloadavg(),
        },
        "settings": {
            "fps": FPS,
            "horizon": policy.horizon,
            "threshold": THRESHOLD,
            "margin_s": MARGIN_S,
            "episodes": args.episodes,
            "episode_s": task.episode_s,
            "max_guidance_weight": 5.0,
            "crossfade_s": 0.1,
            "ensemble_coeff": 0.01,
            **(rtc_so101.settings() if so101 else {}),
        },
        "training": training,
        "episodes_wall_s": time.perf_counter() - began,
        "results": results,
        "headline": headline,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    plot(results, output.with_suffix(".png"), task.what)
    print(f"wrote {output} and {output.with_suffix('.png').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
