"""`lerobot-ros eval --num-envs N --through-ros`: N episodes at once through the real nodes, one policy node.

Started here, as processes: N sim bridges in real time, in the namespaces /robot_0 .. /robot_N-1 (each bridge's
/clock and camera topics remapped under its namespace, so the bridges do not share a topic), one action executor
per bridge in the same namespace (the sim's robot configuration, `joint_trajectory` output, started disabled),
and ONE policy node with `robots: [/robot_0, ...]`, which assembles each robot's observations, schedules each
robot's inferences and runs the inferences due together as one batch (`lerobot_policy_node.nodes.robot_lanes`).

This process supervises every robot like the demo's real-time evaluation does one: take the next seed, stop the
executor (`~/enable` false), reset the bridge with the seed, wait for a chunk computed from the new episode,
enable the executor, and wait for `sim/episode_end`. Seeds go out in order to whichever robot is free (episode
i gets seed + i), so a seed gives the same episode start (block and goal) as in the serial and in-process
evaluations; the episode itself runs in real time (inference latency, the executor's blending on the wall
clock), so its steps and return are not the lockstep ones: the nodes need a running clock, not lockstep (the
executor ticks on the wall clock), which is why this variant runs in real time.

Reported per episode: seed, success, end reason, return, steps, the initial block/goal positions, duration;
overall: episodes per minute, the policy node's batch sizes (from its /diagnostics) and the executors' chunk
statistics. An episode's steps, return and end are the bridge's own (`sim/step_outcome`: each step numbered and
stamped, the end on the step that ended it), and the steps the sim ran before the executor took control are
those stamped before the supervisor asked it to (`EpisodeSteps`): counted by the stamps, not by when this
process got round to the messages, since under load it can take an episode's messages after the episode ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lerobot_eval.failure_causes import DiagnosticsLog, classify, diagnostics_source, episode_signals
from lerobot_ros.bounded_yaml import load_yaml
from lerobot_ros.command import CommandError

ROBOT_CONFIG = "config/robots/so101_sim.yaml"
STARTUP_TIMEOUT_S = 180.0


def robot_namespaces(count: int) -> list[str]:
    return [f"/robot_{i}" for i in range(count)]


def node_argv(executable: str, namespace: str, remaps: list[str], parameters: dict[str, str]) -> list[str]:
    """The command line of a node in `namespace`, with remappings and parameters."""
    argv = [str(Path(sys.executable).parent / executable), "--ros-args"]
    if namespace:
        argv += ["-r", f"__ns:={namespace}"]
    for remap in remaps:
        argv += ["-r", remap]
    for key, value in parameters.items():
        argv += ["-p", f"{key}:={value}"]
    return argv


def robots_config(source: Path, robots: list[str], path: Path) -> Path:
    """The sim's robot configuration (one `/follower/action_executor` section) with a section per robot's executor."""
    sections = load_yaml(source.read_text()) or {}
    section = next((v for k, v in sections.items() if str(k).endswith("/action_executor")), None)
    if section is None:
        raise CommandError(f"{source} has no action_executor section to give each robot's executor")
    path.write_text(yaml.safe_dump({f"{robot}/action_executor": section for robot in robots}, sort_keys=False))
    return path


def bridge_argv(namespace: str, cameras: str, env_id: str, fps: float, seed: int, max_steps: int) -> list[str]:
    names = [c.split(":")[0].strip() for c in cameras.split(",") if c.strip()]
    remaps = [f"/clock:={namespace}/clock"]
    for name in names:
        for leaf in ("image_raw", "camera_info"):
            remaps.append(f"/cameras/{name}/{leaf}:={namespace}/cameras/{name}/{leaf}")
    parameters = {"env_id": env_id, "mode": "realtime", "cameras": f"'{cameras}'", "fps": str(fps),
                  "seed": str(seed), "max_episode_steps": str(max_steps)}  # fmt: skip
    return node_argv("sim_bridge", namespace, remaps, parameters)


@dataclass
class EpisodeSteps:
    """One episode's steps as the sim bridge numbered and stamped them (its `sim/step_outcome` messages).

    Stamps are the bridge's wall clock (realtime mode), the clock `control_s` is on. Whatever the order and the
    time at which the outcomes are taken, the counts are the same: the end is the first step that carries one
    (every later step of an ended episode repeats it), and a step lost on the way leaves the numbering intact.
    """

    episode_index: int
    end: str = ""
    end_step: int = 0
    end_stamp_s: float = 0.0
    _stamps: dict[int, float] = field(default_factory=dict)
    _rewards: dict[int, float] = field(default_factory=dict)

    def add(self, episode_index: int, step_index: int, stamp_s: float, reward: float, episode_end: str) -> None:
        """One outcome; those of other episodes are ignored."""
        if episode_index != self.episode_index:
            return
        self._stamps[step_index] = stamp_s
        self._rewards[step_index] = reward
        if episode_end and (not self.end or step_index < self.end_step):
            self.end, self.end_step, self.end_stamp_s = episode_end, step_index, stamp_s

    @property
    def ended(self) -> bool:
        return bool(self.end)

    def steps_before(self, control_s: float) -> int:
        """Steps of the episode (up to its end) stamped before `control_s`: the sim ran them without the policy."""
        before = [i for i, stamp in self._stamps.items() if stamp < control_s]
        last = self.end_step if self.ended else max(self._stamps, default=0)
        return min(max(before, default=0), last)

    def episode_return(self) -> float:
        """The sum of the rewards of the episode's steps (up to its end)."""
        last = self.end_step if self.ended else max(self._stamps, default=0)
        return sum(r for i, r in self._rewards.items() if 0 < i <= last)


def episode_counts(steps: EpisodeSteps, control_s: float) -> tuple[int, int]:
    """(steps under the policy's control, steps before it) of an ended episode whose control began at `control_s`
    (the executor was asked to take over; an episode that ended before then ran all its steps without it)."""
    before = steps.steps_before(control_s)
    return steps.end_step - before, before


@dataclass
class _Robot:
    """One robot's episode in progress, as the supervisor sees it."""

    namespace: str
    reset: Any
    enable: Any
    phase: str = "idle"  # idle -> disabling -> resetting -> waiting_chunk -> enabling -> running
    future: Any = None
    index: int = -1
    seed: int = 0
    start_stamp: float = 0.0
    outcomes: EpisodeSteps = field(default_factory=lambda: EpisodeSteps(-1))
    control_s: float = 0.0  # wall clock (the bridge's stamps) when the executor was asked to take over
    started: float = 0.0
    deadline: float = 0.0
    chunk_stamps: list[float] = field(default_factory=list)
    episode_chunks: int = 0
    initial_env: list[float] | None = None
    poses: deque[tuple[float, list[float]]] = field(default_factory=lambda: deque(maxlen=300))
    executor: dict[str, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    horizon: int = 0
    diagnostics: Any = None  # failure_causes.DiagnosticsLog of this robot's executor, sim and the policy node


class _Processes:
    """The nodes started for the evaluation, each in its own session with its log; stopped together."""

    def __init__(self, log_dir: Path) -> None:
        from lerobot_ros.dds import ros_environment

        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.env = ros_environment(dict(os.environ))
        self.env.setdefault("MUJOCO_GL", "egl")
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str]) -> None:
        from lerobot_ros.parent_death import parent_death_signal

        with (self.log_dir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=parent_death_signal(signal.SIGINT),  # noqa: PLW1509 - one prctl call in the child
            )  # fmt: skip
        self.started.append((name, process))

    def check(self) -> None:
        for name, process in self.started:
            if process.poll() is not None:
                tail = (self.log_dir / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise CommandError(
                    f"{name} exited with {process.returncode} during the evaluation: {' '.join(tail) or 'no output'} "
                    f"(log: {self.log_dir / (name + '.log')})",
                    exit_code=1,
                )

    @property
    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self.started}

    def stop(self) -> None:
        for _, process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10.0
        for _, process in self.started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_ros_episodes(
    *,
    settings: Any,
    contract: Any,
    fps: float,
    num_envs: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Run `settings.episodes` episodes on `num_envs` robots through the nodes (see the module docstring)."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseArray
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_srvs.srv import SetBool

    from lerobot_eval.demo.stack import installed_file
    from lerobot_msgs.msg import ActionChunk, PolicyStatus, StepOutcome
    from lerobot_msgs.srv import ResetEnv
    from lerobot_ros.dds import apply_ros_environment
    from lerobot_ros.executors import SingleThreadedExecutor

    if settings.env_id != "so101_pick_place":
        raise CommandError(f"--through-ros drives the SO-101 sim (so101_pick_place) only, not {settings.env_id}")
    out = Path(settings.output_dir)
    robots = robot_namespaces(num_envs)
    robot_config = robots_config(installed_file(ROBOT_CONFIG), robots, out / "robots.yaml")
    contract_path = out / "contract.yaml"
    contract_path.write_text(yaml.safe_dump(contract.to_dict(), sort_keys=False))
    processes = _Processes(out / "ros_logs")
    seeds = [settings.seed + i for i in range(settings.episodes)]
    episodes: dict[int, dict[str, Any]] = {}
    policy_diag: dict[str, str] = {}
    policy_status: dict[str, Any] = {}
    started_at = time.perf_counter()
    try:
        for i, robot in enumerate(robots):
            processes.start(
                f"sim_bridge_{i}",
                bridge_argv(robot, settings.cameras, settings.env_id, fps, settings.seed, settings.max_steps),
            )
            processes.start(
                f"action_executor_{i}",
                node_argv("action_executor", robot, [], {
                    "robot_config": str(robot_config), "output": "joint_trajectory", "blend": settings.blend,
                    "chunk_topic": f"{robot}/policy/action_chunk", "start_enabled": "false",
                }),
            )  # fmt: skip
        processes.start(
            "policy_node",
            node_argv("policy_node", "", [], {
                "checkpoint": settings.checkpoint, "contract": str(contract_path), "device": settings.device,
                "threshold": str(settings.threshold), "blend": settings.blend,
                "robots": "[" + ", ".join(f"'{r}'" for r in robots) + "]",
            }),
        )  # fmt: skip
        apply_ros_environment()
        for key in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID"):
            if key in processes.env:
                os.environ[key] = processes.env[key]
        # A context of its own: the caller may have rclpy initialised already (or initialise it later).
        context = rclpy.Context()
        rclpy.init(context=context)
        node = rclpy.create_node("eval_supervisor", context=context)
        spinner = SingleThreadedExecutor(context=context)
        spinner.add_node(node)
        try:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE)  # fmt: skip
            reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            state = [_Robot(r, node.create_client(ResetEnv, f"{r}/sim/reset"),
                            node.create_client(SetBool, f"{r}/action_executor/enable")) for r in robots]  # fmt: skip
            for robot in state:
                _subscribe(node, robot, StepOutcome, PoseArray, ActionChunk, reliable)

            def on_status(msg: Any) -> None:
                policy_status.update(state=msg.state, message=msg.message, chunks=int(msg.chunks_published))

            for robot in state:
                robot.diagnostics = DiagnosticsLog()

            def on_diagnostics(msg: Any) -> None:
                now = time.monotonic()
                for status in msg.status:
                    values = {kv.key: kv.value for kv in status.values}
                    if status.name.endswith(": policy") and "batch_sizes" in values:
                        policy_diag.update(values)
                    for robot in state:
                        source = diagnostics_source(status.name, f"{robot.namespace}/")
                        if source is not None:
                            robot.diagnostics.add(source, now, values)
                        if status.name.startswith(f"{robot.namespace}/action_executor"):
                            robot.executor = {k: float(v) for k, v in values.items() if _is_number(v)}

            node.create_subscription(PolicyStatus, "/policy/status", on_status, latched)
            node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 50)
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while policy_status.get("state") != "active" or not all(
                r.reset.service_is_ready() and r.enable.service_is_ready() for r in state
            ):
                processes.check()
                if policy_status.get("state") == "error":
                    raise CommandError(f"the policy node failed: {policy_status.get('message')}", exit_code=1)
                if time.monotonic() > deadline:
                    raise CommandError(f"the nodes did not start within {STARTUP_TIMEOUT_S:g} s "
                                       f"(logs: {processes.log_dir})", exit_code=1)  # fmt: skip
                spinner.spin_once(timeout_sec=0.05)
            progress(f"{settings.episodes} episodes on {num_envs} robots through ROS in real time: {num_envs} sim "
                     f"bridges, {num_envs} executors, one policy node")  # fmt: skip
            progress_started = time.perf_counter()
            next_index = 0
            episode_s = settings.max_steps / fps
            while len(episodes) < len(seeds):
                processes.check()
                spinner.spin_once(timeout_sec=0.01)
                for robot in state:
                    if robot.phase == "idle" and next_index < len(seeds):
                        robot.index, robot.seed = next_index, seeds[next_index]
                        next_index += 1
                        robot.future = robot.enable.call_async(SetBool.Request(data=False))
                        robot.phase, robot.deadline = "disabling", time.monotonic() + 60.0
                    elif robot.phase != "idle" and time.monotonic() > robot.deadline:
                        raise CommandError(f"{robot.namespace}: episode {robot.index} stuck while {robot.phase} "
                                           f"(logs: {processes.log_dir})", exit_code=1)  # fmt: skip
                    elif robot.phase in ("disabling", "enabling") and robot.future.done():
                        _check_enable(robot, robot.future.result(), processes.log_dir)
                    if robot.phase == "disabling" and robot.future.done():
                        request = ResetEnv.Request(use_seed=True, seed=robot.seed)
                        robot.future, robot.phase = robot.reset.call_async(request), "resetting"
                    elif robot.phase == "resetting" and robot.future.done():
                        response = robot.future.result()
                        if not response.success:
                            raise CommandError(f"{robot.namespace} refused the reset to seed {robot.seed}: "
                                               f"{response.message}", exit_code=1)  # fmt: skip
                        robot.start_stamp = response.stamp.sec + response.stamp.nanosec * 1e-9
                        if robot.outcomes.episode_index != int(response.episode_index):
                            robot.outcomes = EpisodeSteps(int(response.episode_index))
                        robot.initial_env = None
                        robot.phase = "waiting_chunk"
                    if robot.phase == "waiting_chunk" and robot.initial_env is None:
                        # The episode's first poses: the reset's snapshot, stamped with the reset's stamp.
                        robot.initial_env = next((v for t, v in robot.poses if t >= robot.start_stamp - 1e-6), None)
                    if (
                        robot.phase == "waiting_chunk"
                        and robot.initial_env is not None
                        and any(s >= robot.start_stamp for s in robot.chunk_stamps)
                    ):
                        robot.control_s, robot.started = time.time(), time.monotonic()
                        robot.future = robot.enable.call_async(SetBool.Request(data=True))
                        robot.phase = "enabling"
                    elif robot.phase == "enabling" and robot.future.done():
                        robot.episode_chunks = sum(s >= robot.start_stamp for s in robot.chunk_stamps)
                        robot.phase = "running"
                        robot.latencies = []
                        robot.deadline = time.monotonic() + episode_s * 5 + 60.0
                    elif robot.phase == "running" and robot.outcomes.ended:
                        chunks = sum(s >= robot.start_stamp for s in robot.chunk_stamps)
                        steps, before = episode_counts(robot.outcomes, robot.control_s)
                        # The episode's end on the monotonic clock of the diagnostics (taken maybe later than it
                        # happened); one that ended before control began has no window under control.
                        ended = time.monotonic() - max(0.0, time.time() - robot.outcomes.end_stamp_s)
                        end = robot.outcomes.end
                        episodes[robot.index] = {
                            "index": robot.index, "seed": robot.seed, "success": end == "success",
                            "end": end, "return": robot.outcomes.episode_return(), "steps": steps, "chunks": chunks,
                            "robot": robot.namespace, "initial_environment_state": robot.initial_env,
                            "duration_s": round(max(0.0, ended - robot.started), 3),
                            "window": (robot.started, max(ended, robot.started), before,
                                       list(robot.latencies), robot.horizon, robot.namespace),
                        }  # fmt: skip
                        robot.enable.call_async(SetBool.Request(data=False))  # its counters stop with the episode
                        robot.chunk_stamps = [s for s in robot.chunk_stamps if s >= robot.start_stamp][-4:]
                        progress(f"episode {robot.index} (seed {robot.seed}) on {robot.namespace}: "
                                 f"{'success' if episodes[robot.index]['success'] else 'failure'} ({end}), "
                                 f"{steps + before} steps ({before} before the executor took control)")  # fmt: skip
                        robot.phase = "idle"
            wall = time.perf_counter() - progress_started
            for robot in state:  # stop every robot; one more diagnostics period with the final counters
                robot.enable.call_async(SetBool.Request(data=False))
            settle = time.monotonic() + 2.5
            while time.monotonic() < settle:
                spinner.spin_once(timeout_sec=0.05)
            executors = [robot.executor for robot in state]
            logs = {robot.namespace: robot.diagnostics for robot in state}
            for row in episodes.values():
                _diagnose(row, logs, fps)
        finally:
            spinner.shutdown()
            node.destroy_node()
            rclpy.shutdown(context=context)
    finally:
        processes.stop()
    return {
        "episodes": [episodes[i] for i in sorted(episodes)],
        "wall_s": wall,
        "total_s": time.perf_counter() - started_at,
        "policy": policy_diag,
        "policy_processes": sum(1 for name in processes.pids if name.startswith("policy_node")),
        "executors": executors,
    }


def _subscribe(node: Any, robot: _Robot, step_outcome: Any, pose_array: Any, action_chunk: Any, reliable: Any) -> None:
    """The robot's step outcomes (steps, rewards, end), first object poses and chunks, kept on `robot`."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    deep = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)

    def on_outcome(msg: Any) -> None:
        # Whatever the phase: the episode's steps before the executor took control count too (its time limit
        # counts them), and an episode can end before its first chunk arrives (under load).
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        if int(msg.episode_index) > robot.outcomes.episode_index:
            robot.outcomes = EpisodeSteps(int(msg.episode_index))  # the reset asked for, its answer not yet taken
        robot.outcomes.add(int(msg.episode_index), int(msg.step_index), stamp, float(msg.reward), str(msg.episode_end))

    def on_poses(msg: Any) -> None:
        # Kept whatever the phase: the reset's own snapshot is published before its service answer arrives.
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        robot.poses.append(
            (stamp, [float(v) for p in msg.poses[:2] for v in (p.position.x, p.position.y, p.position.z)])
        )

    def on_chunk(msg: Any) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        robot.chunk_stamps.append(stamp)
        if robot.phase == "running":
            robot.latencies.append(time.time() - stamp)
            robot.horizon = int(msg.horizon)

    node.create_subscription(step_outcome, f"{robot.namespace}/sim/step_outcome", on_outcome, deep)
    node.create_subscription(pose_array, f"{robot.namespace}/sim/object_poses", on_poses, deep)
    node.create_subscription(action_chunk, f"{robot.namespace}/policy/action_chunk", on_chunk, reliable)


def _diagnose(row: dict[str, Any], logs: dict[str, Any], fps: float) -> None:
    """The episode's failure cause and signals (lerobot_eval.failure_causes) in place of its receive window."""
    start, end, before, latencies, horizon, namespace = row.pop("window")
    signals = episode_signals(
        logs[namespace], start_s=start, end_s=end, fps=fps, steps=int(row["steps"]) + before,
        steps_before_control=before, horizon=horizon, latencies_s=latencies,
    )  # fmt: skip
    diagnosis = classify(bool(row["success"]), signals)
    row.update(cause=diagnosis.cause, causes=list(diagnosis.causes), why=diagnosis.text, signals=signals.as_dict())


def _check_enable(robot: _Robot, response: Any, log_dir: Path) -> None:
    if not response.success:
        raise CommandError(f"{robot.namespace}/action_executor refused ~/enable: {response.message} "
                           f"(log: {log_dir})", exit_code=1)  # fmt: skip


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
