"""Stage 3, `lerobot-ros demo eval`: the trained policy deployed on the simulated SO-101 through the real nodes.

Runs launch/sim_policy.launch.yaml (sim bridge in real time + policy node + action executor) and supervises it
from this process: for each evaluation episode it stops the executor (`~/enable` false), resets the sim with the
episode's seed (seeds not used for recording), waits for a chunk computed from the new episode, enables the
executor (which restarts from the measured pose) and waits for `sim/episode_end` (success or time limit).
Every action chunk's latency (arrival minus the stamp of the observation it was computed from) and inference
time, the executor's diagnostics (starvation, tick jitter) and a GIF of the first episode are kept. Episodes
already in the work folder are not run again. The scripted expert runs on the same seeds in this process (no
ROS) for comparison.

With `--num-envs N` the episodes run instead in lockstep on N in-process simulations at once
(`lerobot_eval.vector_evaluation`, what `lerobot-ros eval --num-envs` runs: the bridge's controller and
contract conversion, the executor core on the simulation's step clock, crossfade, re-plan at half a chunk): the
policy's success on the same seeds without real-time effects, several episodes at a time; no latency figures.
With `--num-envs N --through-ros` they run in real time through the nodes, N at a time
(`lerobot_eval.ros_evaluation`, what `lerobot-ros eval --num-envs N --through-ros` runs: N sim bridges in
namespaces /robot_0.., N action executors, one policy node batching their inferences).

Every run appends its mode, episode count and wall time to runs.jsonl; the report states the mode and the
episodes per minute of each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lerobot_eval.demo.stack import LaunchedStack, installed_file, ros_node, spin_until
from lerobot_eval.demo.workspace import (
    DemoLayout,
    DemoSettings,
    append_jsonl,
    checkpoint_id,
    evaluated_episodes,
    read_jsonl,
    trained_step,
)
from lerobot_eval.failure_causes import (
    EXECUTOR,
    POLICY,
    Diagnosis,
    DiagnosticsLog,
    EpisodeSignals,
    ProgressWatch,
    classify,
    diagnostics_source,
    episode_signals,
)
from lerobot_ros.command import CommandError

NAMESPACE = "/follower"
SIM_CONTRACT = "config/contracts/so101_sim.yaml"
REAL_TIME = "real time through ROS"
ENV_ID = "so101_pick_place"
CAMERA = "front"
GIF_EVERY = 2  # keep every 2nd camera frame (15 fps)
# An episode whose sim makes no step for this long is stuck (a slow sim is not: its steps are the episode's clock).
STALL_S = 30.0
# How long to wait for the nodes' reports covering an episode's end (they report once a second).
REPORT_WAIT_S = 2.5
EXECUTOR_KEYS = (
    "chunks_accepted", "chunks_rejected", "starvation_events", "starvation_s", "max_latency_s",
    "tick_jitter_p50_ms", "tick_jitter_p99_ms", "max_boundary_step", "max_inner_step", "steps_dropped_late",
)  # fmt: skip


class Supervisor:
    """The evaluation's own node: resets, enables, and watches chunks, outcomes and diagnostics."""

    def __init__(self, node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String
        from std_srvs.srv import SetBool

        from lerobot_msgs.msg import ActionChunk, PolicyStatus, StepOutcome
        from lerobot_msgs.srv import ResetEnv

        self.node = node
        self._reset = node.create_client(ResetEnv, f"{NAMESPACE}/sim/reset")
        self._reset_type = ResetEnv.Request
        self._enable = node.create_client(SetBool, f"{NAMESPACE}/action_executor/enable")
        self._enable_type = SetBool.Request
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(String, f"{NAMESPACE}/sim/episode_end", self._on_end, latched)
        node.create_subscription(ActionChunk, "/policy/action_chunk", self._on_chunk, reliable)
        node.create_subscription(PolicyStatus, "/policy/status", self._on_status, latched)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        node.create_subscription(StepOutcome, f"{NAMESPACE}/sim/step_outcome", self._on_outcome, reliable)
        self.ends: list[str] = []
        self.end_times: list[float] = []
        self.diagnostics = DiagnosticsLog()
        # The sim's own clock: the newest step of each episode, and the step at which each episode ended.
        self.steps: dict[int, int] = {}
        self.end_steps: dict[int, int] = {}
        self.chunks: list[dict[str, Any]] = []
        self.policy_status: dict[str, Any] = {}
        self.executor: dict[str, float] = {}
        self.frames: list[np.ndarray] | None = None
        self._image_count = 0
        self._camera: Any = None

    def watch_camera(self, stack: LaunchedStack) -> None:
        """Subscribe to the sim's camera (for the GIF) and wait for its first image: the sim renders a camera only
        while its topic has a subscriber (`lazy_cameras`), and the policy reads none."""
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import Image

        self.frames = []
        self._camera = self.node.create_subscription(
            Image, f"/cameras/{CAMERA}/image_raw", self._on_image, qos_profile_sensor_data
        )
        spin_until(self.node, lambda: self._image_count > 0, stack, 60.0, f"waiting for the {CAMERA} camera")
        self.frames = []

    def unwatch_camera(self) -> None:
        """Drop the camera subscription: the sim stops rendering it."""
        if self._camera is not None:
            self.node.destroy_subscription(self._camera)
            self._camera = None
        self.frames = None

    def now_s(self) -> float:
        return float(self.node.get_clock().now().nanoseconds) * 1e-9

    def _on_end(self, msg: Any) -> None:
        self.ends.append(str(msg.data))
        self.end_times.append(time.monotonic())

    def _on_outcome(self, msg: Any) -> None:
        episode, step = int(msg.episode_index), int(msg.step_index)
        self.steps[episode] = max(step, self.steps.get(episode, 0))
        if msg.episode_end:  # every later step of an ended episode says so too: its first is the end
            self.end_steps.setdefault(episode, step)

    def _on_chunk(self, msg: Any) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.chunks.append(
            {
                "chunk_id": int(msg.chunk_id),
                "stamp": stamp,
                "latency_s": self.now_s() - stamp,
                "inference_s": float(msg.inference_time),
                "horizon": int(msg.horizon),
            }
        )

    def _on_status(self, msg: Any) -> None:
        self.policy_status = {
            "state": msg.state,
            "chunks_published": int(msg.chunks_published),
            "mean_inference_s": float(msg.mean_inference_time),
            "stale_observations": int(msg.stale_observations),
            "message": msg.message,
        }

    def _on_diagnostics(self, msg: Any) -> None:
        now = time.monotonic()
        for status in msg.status:
            source = diagnostics_source(status.name)
            if source is None:
                continue
            values = {kv.key: kv.value for kv in status.values}
            self.diagnostics.add(source, now, values)
            if source == EXECUTOR:
                self.executor = {k: float(values[k]) for k in EXECUTOR_KEYS if k in values}

    def _on_image(self, msg: Any) -> None:
        if self.frames is None:
            return
        self._image_count += 1
        if self._image_count % GIF_EVERY == 0:
            pixels = np.frombuffer(msg.data, dtype=np.uint8).reshape(msg.height, msg.step)[:, : msg.width * 3]
            self.frames.append(pixels.reshape(msg.height, msg.width, 3).copy())

    def call(self, client: Any, request: Any, stack: LaunchedStack, what: str) -> Any:
        """Call a service and wait for its answer (CommandError when the stack dies or it takes > 30 s)."""
        spin_until(self.node, client.service_is_ready, stack, 60.0, f"waiting for {client.srv_name}")
        future = client.call_async(request)
        spin_until(self.node, future.done, stack, 30.0, what)
        return future.result()

    def set_enabled(self, enabled: bool, stack: LaunchedStack) -> None:
        self.call(self._enable, self._enable_type(data=enabled), stack, "switching the executor")

    def reset(self, seed: int, stack: LaunchedStack) -> tuple[float, int]:
        """Reset the sim to `seed`: the new episode's first stamp and its index."""
        response = self.call(self._reset, self._reset_type(use_seed=True, seed=seed), stack, f"resetting to {seed}")
        if not response.success:
            raise CommandError(f"the sim bridge refused the reset to seed {seed}: {response.message}", exit_code=1)
        return float(response.stamp.sec + response.stamp.nanosec * 1e-9), int(response.episode_index)


def evaluate(
    layout: DemoLayout,
    settings: DemoSettings,
    say: Callable[[str], None],
    num_envs: str | None = None,
    through_ros: bool = False,
) -> dict[str, Any]:
    """Run the missing evaluation episodes (`num_envs`: in lockstep on that many in-process envs; with `through_ros`,
    on that many robots through the nodes), then summarise all of them (eval.json)."""
    if through_ros and num_envs is None:
        raise CommandError("--through-ros runs several robots at once: give --num-envs N (or --num-envs auto)")
    step = trained_step(layout)
    if step == 0:
        raise CommandError(f"no trained checkpoint in {layout.train}; run `lerobot-ros demo train` first")
    weights = checkpoint_id(layout)
    done = evaluated_episodes(layout)
    if done and any(row.get("checkpoint_id") != weights for row in done):
        say(f"eval: the checkpoint changed (now step {step}); its {len(done)} earlier episodes are evaluated again")
        for name in ("episodes.jsonl", "chunks.jsonl", "eval.json", "executor.jsonl", "policy.jsonl", "runs.jsonl"):
            (layout.eval / name).unlink(missing_ok=True)
        for gif in layout.eval.glob("episode_*.gif"):
            gif.unlink()
        done = []
    missing = settings.eval_episodes - len(done)
    if missing <= 0:
        say(f"eval: {len(done)} episodes already evaluated at step {step}; nothing to run")
    else:
        how = (
            "through policy node + executor + sim bridge (real time)"
            if num_envs is None
            else ("through the nodes (real time), several robots at once" if through_ros else "in lockstep")
        )
        say(
            f"eval: {missing} episode(s) of the policy at step {step} {how}, "
            f"seeds {settings.eval_seed + len(done)}..{settings.eval_seed + settings.eval_episodes - 1}"
        )
        if num_envs is None:
            _run_episodes(layout, settings, (step, weights), len(done), say)
        elif through_ros:
            _run_ros_episodes(layout, settings, (step, weights), len(done), say, num_envs)
        else:
            _run_lockstep_episodes(layout, settings, (step, weights), len(done), say, num_envs)
    return summarize(layout, settings, say)


def _run_lockstep_episodes(
    layout: DemoLayout,
    settings: DemoSettings,
    checkpoint: tuple[int, str],
    first: int,
    say: Callable[[str], None],
    num_envs: str,
) -> None:
    from lerobot_contract.time import NS
    from lerobot_eval.vector_evaluation import contract_env_factory, run_vector_episodes

    fps = 30.0
    seeds = list(range(settings.eval_seed + first, settings.eval_seed + settings.eval_episodes))
    max_steps = round(settings.eval_max_s * fps)
    envs, policy, source = _envs_and_policy(layout, num_envs, len(seeds))
    camera = f"observation.images.{CAMERA}"
    contract = source.select([*(f.key for f in policy.inputs), "action", camera])
    say(f"  in lockstep on {envs} in-process envs (no ROS, no real-time effects)")
    mode = _lockstep_mode(envs)
    layout.eval.mkdir(parents=True, exist_ok=True)
    result = run_vector_episodes(
        policy=policy, env_factory=contract_env_factory(ENV_ID, contract, fps, f"{CAMERA}:320x240",
                                                        max_steps),
        num_envs=envs, seeds=seeds, max_steps=max_steps, period_ns=round(NS / fps),
        joint_names=tuple(contract.features["action"].dataset_names or ()), blend="crossfade", threshold=0.5,
        camera_key=camera, videos=max(0, settings.gif_episodes - first), progress=lambda _line: None,
    )  # fmt: skip
    for row in result.episodes:
        index = first + int(row["index"])
        steps = int(row["steps"])
        end = "success" if row["success"] else ("time_limit" if steps >= max_steps else "terminated")
        episode = _eval_row(index, int(row["seed"]), bool(row["success"]), end, round(steps / fps, 3),
                            int(row["chunks"]), checkpoint, mode=mode,
                            **_diagnosis_fields(classify(bool(row["success"]), None), None))  # fmt: skip
        append_jsonl(layout.eval_log, [episode])
        say(
            f"  episode {index} (seed {row['seed']}): {'success' if row['success'] else 'failure'} ({end}) after "
            f"{steps / fps:.1f} s simulated, {row['chunks']} chunks  [{index + 1}/{settings.eval_episodes}]"
        )
        frames = result.frames.get(int(row["index"]))
        if frames:
            write_gif(layout.eval / f"episode_{index:03d}.gif", frames[::GIF_EVERY], fps / GIF_EVERY)
    _log_run(layout, mode, envs, len(result.episodes), result.wall_s, say)


def _lockstep_mode(envs: int) -> str:
    return f"lockstep, {envs} envs"


def _through_ros_mode(robots: int) -> str:
    return f"{REAL_TIME}, {robots} robots"


def _envs_and_policy(layout: DemoLayout, num_envs: str, episodes: int) -> tuple[int, Any, Any]:
    """How many envs (`--num-envs` checked against the machine), the policy and its contract (the checkpoint's own,
    else the sim's); one-line CommandErrors."""
    from lerobot_contract import ContractError
    from lerobot_policy_node.core.errors import PolicyLoadError
    from lerobot_policy_node.core.resolve import resolve_policy
    from lerobot_ros.vector_env import choose_num_envs

    try:
        envs = choose_num_envs(num_envs, episodes)
        policy, source = resolve_policy(str(layout.checkpoint), default_contract=installed_file(SIM_CONTRACT))
    except (ValueError, PolicyLoadError, ContractError) as err:
        raise CommandError(str(err)) from None
    return envs, policy, source


def _log_run(
    layout: DemoLayout, mode: str, envs: int, episodes: int, wall_s: float, say: Callable[[str], None]
) -> None:
    """One evaluation run's throughput, kept in runs.jsonl for the report: in lockstep from the workers' start, in
    real time from the first episode once the nodes are up."""
    from lerobot_ros.vector_env import episodes_per_minute

    rate = episodes_per_minute(episodes, wall_s)
    row = {"mode": mode, "envs": envs, "episodes": episodes, "wall_s": round(wall_s, 2),
           "episodes_per_minute": round(rate, 2)}  # fmt: skip
    append_jsonl(layout.eval / "runs.jsonl", [row])
    say(f"  {episodes} episodes in {wall_s:.0f} s ({mode}): {rate:.1f} episodes per minute")


def _run_ros_episodes(
    layout: DemoLayout,
    settings: DemoSettings,
    checkpoint: tuple[int, str],
    first: int,
    say: Callable[[str], None],
    num_envs: str,
) -> None:
    """`--num-envs N --through-ros`: N sim bridges, N executors and one policy node (lerobot_eval.ros_evaluation)."""
    from lerobot_eval.evaluation import EvalSettings
    from lerobot_eval.ros_evaluation import run_ros_episodes

    fps = 30.0
    episodes = settings.eval_episodes - first
    envs, policy, source = _envs_and_policy(layout, num_envs, episodes)
    visual = any(feature.visual for feature in policy.inputs)
    contract = source.select([*(f.key for f in policy.inputs), "action"])
    layout.eval.mkdir(parents=True, exist_ok=True)
    out = layout.root / "logs" / "eval_through_ros"
    out.mkdir(parents=True, exist_ok=True)
    eval_settings = EvalSettings(
        checkpoint=str(layout.checkpoint), contract="", episodes=episodes, max_steps=round(settings.eval_max_s * fps),
        seed=settings.eval_seed + first, env_id=ENV_ID, cameras=f"{CAMERA}:320x240" if visual else "", videos=0,
        blend="crossfade", threshold=0.5, device="cpu", output_dir=out,
    )  # fmt: skip
    say(f"  {envs} robots through ROS: {envs} sim bridges, {envs} action executors, one policy node (logs: {out})")
    result = run_ros_episodes(settings=eval_settings, contract=contract, fps=fps, num_envs=envs, progress=say)
    mode = _through_ros_mode(envs)
    for row in result["episodes"]:
        index = first + int(row["index"])
        why = {k: row[k] for k in ("cause", "causes", "why", "signals") if k in row}
        episode = _eval_row(index, int(row["seed"]), bool(row["success"]), str(row["end"]), float(row["duration_s"]),
                            int(row["chunks"]), checkpoint, mode=mode, robot=row["robot"], **why)  # fmt: skip
        append_jsonl(layout.eval_log, [episode])
    append_jsonl(layout.eval / "executor.jsonl", [{k: v for k, v in e.items() if k in EXECUTOR_KEYS}
                                                  for e in result["executors"] if e])  # fmt: skip
    _log_run(layout, mode, envs, len(result["episodes"]), float(result["wall_s"]), say)


def _run_episodes(
    layout: DemoLayout, settings: DemoSettings, checkpoint: tuple[int, str], first: int, say: Callable[[str], None]
) -> None:
    fps = 30.0
    arguments = {
        "checkpoint": str(layout.checkpoint),
        "cameras": f"{CAMERA}:320x240",
        "max_episode_steps": str(round(settings.eval_max_s * fps)),
        "seed": str(settings.eval_seed + first),
        "realtime": "true" if settings.eval_realtime else "false",
    }
    layout.eval.mkdir(parents=True, exist_ok=True)
    stack = LaunchedStack(installed_file("launch/sim_policy.launch.yaml"), arguments, layout.root / "logs" / "eval.log")
    try:
        with ros_node("demo_eval") as node:
            supervisor = Supervisor(node)
            spin_until(
                node, lambda: supervisor.policy_status.get("state") == "active", stack, 180.0, "starting the policy"
            )
            started = time.monotonic()
            for index in range(first, settings.eval_episodes):
                row = _episode(supervisor, stack, settings, index, checkpoint, layout)
                append_jsonl(layout.eval_log, [row])
                say(
                    f"  episode {index} (seed {row['seed']}): {'success' if row['success'] else 'failure'} "
                    f"({row['end']}) after {row['duration_s']:.1f} s, {row['chunks']} chunks  "
                    f"[{index + 1}/{settings.eval_episodes}]"
                )
            _log_run(layout, REAL_TIME, 1, settings.eval_episodes - first, time.monotonic() - started, say)
            supervisor.set_enabled(False, stack)
            _settle(node, 1.5)  # one more diagnostics period with the final counters
            append_jsonl(layout.eval / "executor.jsonl", [supervisor.executor])
            append_jsonl(layout.eval / "policy.jsonl", [supervisor.policy_status])
    finally:
        stack.stop()


def _settle(node: Any, seconds: float) -> None:
    import rclpy

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)


def _episode(
    supervisor: Supervisor,
    stack: LaunchedStack,
    settings: DemoSettings,
    index: int,
    checkpoint: tuple[int, str],
    layout: DemoLayout,
) -> dict[str, Any]:
    seed = settings.eval_seed + index
    supervisor.set_enabled(False, stack)
    if index < settings.gif_episodes:
        supervisor.watch_camera(stack)
    ends_before = len(supervisor.ends)
    chunks_before = len(supervisor.chunks)
    start_stamp, sim_episode = supervisor.reset(seed, stack)

    def episode_chunks() -> list[dict[str, Any]]:
        """The chunks computed on this episode's observations, the first one included (waited for below, before
        the executor is enabled: the executor starts the episode with it)."""
        return [c for c in supervisor.chunks[chunks_before:] if c["stamp"] >= start_stamp]

    spin_until(supervisor.node, lambda: bool(episode_chunks()), stack, 60.0, f"waiting for a chunk of episode {index}")
    if index < settings.gif_episodes:
        supervisor.frames = []  # from the episode's start
    supervisor.set_enabled(True, stack)
    started = time.monotonic()
    max_steps = round(settings.eval_max_s * 30.0)
    steps_before_control = supervisor.steps.get(sim_episode, 0)
    # The episode's limit is the sim's own steps: wait as long as the sim steps, however slowly.
    watch = ProgressWatch(STALL_S)
    ended = lambda: len(supervisor.ends) > ends_before  # noqa: E731

    def ended_or_stuck() -> bool:
        now = time.monotonic()
        watch.update(supervisor.steps.get(sim_episode, 0), now)
        return ended() or watch.stuck(now)

    spin_until(supervisor.node, ended_or_stuck, stack, float("inf"), f"running evaluation episode {index}")
    if not ended():
        raise CommandError(
            f"evaluation episode {index}: the sim made no step for {STALL_S:g} s (stuck at step "
            f"{supervisor.steps.get(sim_episode, 0)}); see {stack.log}",
            exit_code=1,
        )
    ended_at = supervisor.end_times[-1]
    duration = ended_at - started
    supervisor.set_enabled(False, stack)  # the executor's counters stop with the episode
    end = supervisor.ends[-1]
    chunks = episode_chunks()
    append_jsonl(layout.chunk_log, [{"episode": index, **c} for c in chunks])
    if supervisor.frames:
        write_gif(layout.eval / f"episode_{index:03d}.gif", supervisor.frames, 30.0 / GIF_EVERY)
    supervisor.unwatch_camera()
    # The reports that cover the episode's end (the nodes report once a second), then its signals.
    _spin_while(
        supervisor.node,
        lambda: (
            not (
                sim_episode in supervisor.end_steps
                and supervisor.diagnostics.reported_after(EXECUTOR, ended_at)
                and supervisor.diagnostics.reported_after(POLICY, ended_at)
            )
        ),
        REPORT_WAIT_S,
    )
    signals = episode_signals(
        supervisor.diagnostics, start_s=started, end_s=ended_at, fps=30.0,
        steps=min(supervisor.end_steps.get(sim_episode, supervisor.steps.get(sim_episode, 0)), max_steps),
        steps_before_control=steps_before_control, horizon=max((c["horizon"] for c in chunks), default=0),
        latencies_s=[c["latency_s"] for c in chunks],
    )  # fmt: skip
    diagnosis = classify(end == "success", signals)
    return _eval_row(index, seed, end == "success", end, round(duration, 3), len(chunks), checkpoint,
                     **_diagnosis_fields(diagnosis, signals))  # fmt: skip


def _diagnosis_fields(diagnosis: Diagnosis, signals: EpisodeSignals | None) -> dict[str, Any]:
    """episodes.jsonl's keys saying why an episode failed (`cause` "" for a success) and the signals behind it."""
    out: dict[str, Any] = {"cause": diagnosis.cause, "causes": list(diagnosis.causes), "why": diagnosis.text}
    if signals is not None:
        out["signals"] = signals.as_dict()
    return out


def _spin_while(node: Any, waiting: Callable[[], bool], seconds: float) -> None:
    import rclpy

    end = time.monotonic() + seconds
    while waiting() and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)


def _eval_row(
    index: int,
    seed: int,
    success: bool,
    end: str,
    duration_s: float,
    chunks: int,
    checkpoint: tuple[int, str],
    **extra: Any,
) -> dict[str, Any]:
    """One evaluated episode as episodes.jsonl keeps it (every mode; `extra`: the mode's own keys)."""
    return {
        "episode": index, "seed": seed, "success": success, "end": end, "duration_s": duration_s, "chunks": chunks,
        "checkpoint_step": checkpoint[0], "checkpoint_id": checkpoint[1], **extra,
    }  # fmt: skip


def write_gif(path: Path, frames: list[np.ndarray], fps: float) -> None:
    """An animated GIF (Pillow), looping."""
    from PIL import Image

    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0, optimize=False)


SUMMED = ("chunks_accepted", "chunks_rejected", "starvation_events", "starvation_s", "steps_dropped_late")


def merge_executor_runs(runs: list[dict[str, Any]]) -> dict[str, float]:
    """One set of executor figures over the stack runs of a resumed evaluation: counts add up, the rest is the max
    (for the jitter percentiles, the worst run's)."""
    merged: dict[str, float] = {}
    for run in runs:
        for key, value in run.items():
            merged[key] = merged.get(key, 0.0) + value if key in SUMMED else max(merged.get(key, value), value)
    return merged


def summarize(layout: DemoLayout, settings: DemoSettings, say: Callable[[str], None]) -> dict[str, Any]:
    """eval.json: success of the policy and of the expert on the same seeds, chunk and executor statistics."""
    import json

    from lerobot_sim_bridge.experts.base import run_expert_episodes

    rows = evaluated_episodes(layout)
    chunks = read_jsonl(layout.chunk_log)
    executor = read_jsonl(layout.eval / "executor.jsonl")
    policy = read_jsonl(layout.eval / "policy.jsonl")
    seeds = [int(r["seed"]) for r in rows]
    say(f"eval: the scripted expert on the same {len(seeds)} seeds (in-process, no ROS) for comparison")
    expert = run_expert_episodes("so101_pick_place", seeds, 30.0, round(settings.eval_max_s * 30.0))
    latencies = np.array([c["latency_s"] for c in chunks], dtype=np.float64)
    inference = np.array([c["inference_s"] for c in chunks], dtype=np.float64)

    def percentiles(values: np.ndarray) -> dict[str, float]:
        if not values.size:
            return {}
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99),
                "max": float(values.max())}  # fmt: skip

    successes = sum(1 for r in rows if r["success"])
    summary = {
        "checkpoint": str(layout.checkpoint),
        "checkpoint_step": rows[0]["checkpoint_step"] if rows else trained_step(layout),
        "episodes": len(rows),
        "successes": successes,
        "success_rate": successes / len(rows) if rows else 0.0,
        "expert_successes": expert["successes"],
        "expert_success_rate": expert["successes"] / len(seeds) if seeds else 0.0,
        "seeds": seeds,
        "mode": sorted({str(r.get("mode", REAL_TIME)) for r in rows}),
        "per_episode": rows,
        "expert_per_seed": expert["episodes_detail"],
        "chunk_latency_s": percentiles(latencies),
        "inference_s": percentiles(inference),
        "chunks": len(chunks),
        "executor": merge_executor_runs(executor),
        "policy": policy[-1] if policy else {},
        "gifs": sorted(p.name for p in layout.eval.glob("episode_*.gif")),
        "runs": read_jsonl(layout.eval / "runs.jsonl"),
    }
    layout.eval_summary.write_text(json.dumps(summary, indent=2) + "\n")
    return summary
