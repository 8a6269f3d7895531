"""Closed-loop evaluation against the sim bridge in lockstep (what `lerobot-ros eval` runs).

Episodes go through `lerobot_sim_bridge.ros_env.RosRobotEnv` (a gymnasium env over the contract's topics); actions
stay in dataset units end to end, so the executor core runs without joint limits here (the bridge applies
the robot's).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ChunkRejected, ObservationError, PolicyConfigError, PolicyLoadError
from lerobot_policy_node.core.executor import BlendMode, Chunk, ChunkExecutor, ExecutorConfig
from lerobot_policy_node.core.observations import match_inputs
from lerobot_policy_node.core.policies import ChunkPolicy
from lerobot_policy_node.core.resolve import resolve_policy

# The sim's contract, installed with lerobot_ros (share/lerobot_ros/config/contracts).
DEFAULT_CONTRACT = "config/contracts/so101_sim.yaml"


@dataclass(frozen=True)
class EvalSettings:
    """What `lerobot-ros eval` was asked for."""

    checkpoint: str
    contract: str
    episodes: int
    max_steps: int
    seed: int
    env_id: str
    cameras: str
    videos: int
    blend: str
    threshold: float
    device: str
    output_dir: Path
    start_bridge: bool = True
    step_timeout: float = 30.0
    num_envs: str | None = None  # None: serial through the bridge; a number or "auto": in-process vector env
    through_ros: bool = False  # with num_envs: N sim bridges, N executors and one batching policy node (real time)


def load_for_eval(settings: EvalSettings) -> tuple[ChunkPolicy, Any]:
    """The policy and its contract (from --contract, the checkpoint, or the sim's default)."""
    from lerobot_contract import ContractError
    from lerobot_ros import share
    from lerobot_ros.command import CommandError

    try:
        default: Path | None = share.find(DEFAULT_CONTRACT)
    except share.ShareFileNotFoundError:
        default = None
    try:
        return resolve_policy(
            settings.checkpoint,
            settings.contract,
            device=settings.device,
            default_contract=default,
            contract_option="--contract",
        )
    except (PolicyLoadError, PolicyConfigError, ObservationError, ContractError) as err:
        raise CommandError(str(err)) from None


def _features_to_watch(contract: Any, policy: ChunkPolicy, cameras: str) -> list[str]:
    """The policy's inputs and the action, plus a camera the bridge renders at the contract's size (for videos);
    other contract features (a camera the bridge does not run) would only keep observations from completing."""
    from lerobot_ros.command import CommandError
    from lerobot_sim_bridge.adapters.base import CameraConfig
    from lerobot_sim_bridge.errors import InvalidConfigError

    keys = [feature.key for feature in policy.inputs] + ["action"]
    try:  # the bridge's own parser: the sizes it will render
        configs = [CameraConfig.parse(text) for text in cameras.split(",") if text.strip()]
    except InvalidConfigError as err:
        raise CommandError(f"--cameras: {err}") from None
    sizes = {c.name: (c.height, c.width, 3) for c in configs}
    for key, feature in contract.features.items():
        parts = feature.topic.strip("/").split("/")
        if feature.is_visual and key not in keys and len(parts) > 1 and sizes.get(parts[1]) == feature.shape:
            keys.append(key)
    return keys


def _start_bridge(settings: EvalSettings, namespace: str, fps: float) -> subprocess.Popen[bytes]:
    from lerobot_ros.dds import ros_environment
    from lerobot_ros.parent_death import parent_death_signal

    env = ros_environment(dict(os.environ))
    env.setdefault("MUJOCO_GL", "egl")
    argv = [
        str(Path(sys.executable).parent / "sim_bridge"), "--ros-args", "-r", f"__ns:={namespace}",
        "-p", f"env_id:={settings.env_id}", "-p", "mode:=lockstep", "-p", f"cameras:='{settings.cameras}'",
        "-p", f"fps:={fps}", "-p", f"seed:={settings.seed}", "-p", f"max_episode_steps:={settings.max_steps}",
    ]  # fmt: skip
    log = (settings.output_dir / "sim_bridge.log").open("wb")
    # SIGINT when this evaluation dies, even by SIGKILL (as --through-ros and the demo start theirs).
    return subprocess.Popen(
        argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=parent_death_signal(signal.SIGINT),  # noqa: PLW1509 - one prctl call in the child
    )  # fmt: skip


def _write_video(path: Path, frames: list[np.ndarray], fps: float) -> None:
    import av

    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=round(fps))
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = "yuv420p"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


def _run_vector(
    settings: EvalSettings,
    policy: ChunkPolicy,
    contract: Any,
    fps: float,
    camera_key: str | None,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """`--num-envs`: the episodes on an in-process vector env (lerobot_eval.vector_evaluation)."""
    from lerobot_eval import vector_evaluation as vector
    from lerobot_ros import vector_env
    from lerobot_ros.command import CommandError

    if not settings.start_bridge:
        raise CommandError("--num-envs runs its own simulations in this process: drop --no-bridge")
    try:
        num_envs = vector_env.choose_num_envs(settings.num_envs or vector_env.AUTO, settings.episodes)
        factory = vector.contract_env_factory(settings.env_id, contract, fps, settings.cameras, settings.max_steps)
        factory()  # the contract and cameras are checked here, before any worker starts
        vector.BatchPolicy(policy, 1)
    except ValueError as err:
        raise CommandError(str(err)) from None
    progress(f"{settings.episodes} episodes on {num_envs} envs in lockstep (in-process, one worker each)")
    action = contract.features["action"]
    from lerobot_sim_bridge.errors import SimBridgeError

    try:
        result = vector.run_vector_episodes(
            policy=policy, env_factory=factory, num_envs=num_envs,
            seeds=[settings.seed + i for i in range(settings.episodes)], max_steps=settings.max_steps,
            period_ns=round(NS / fps), joint_names=tuple(action.dataset_names or ()), blend=settings.blend,
            threshold=settings.threshold, camera_key=camera_key, videos=settings.videos, progress=progress,
        )  # fmt: skip
    except SimBridgeError as err:  # raised in a worker (no GL, unknown env id, ...), re-raised here by gymnasium
        raise CommandError(f"evaluation on {num_envs} envs stopped: {err}", exit_code=1) from None
    videos = []
    for index, frames in sorted(result.frames.items()):
        path = settings.output_dir / f"episode_{index:03d}.mp4"
        _write_video(path, frames, fps)
        videos.append(str(path))
    report = _report(settings, contract, result.episodes, result.totals, result.inference_s, videos)
    report["num_envs"] = num_envs
    report["wall_s"] = result.wall_s
    report["episodes_per_minute"] = vector_env.episodes_per_minute(len(result.episodes), result.wall_s)
    report["policy_batch_sizes"] = {"mean": float(np.mean(result.batch_sizes)) if result.batch_sizes else 0.0,
                                    "max": max(result.batch_sizes, default=0)}  # fmt: skip
    return report


def _run_through_ros(
    settings: EvalSettings, policy: ChunkPolicy, contract: Any, fps: float, progress: Callable[[str], None]
) -> dict[str, Any]:
    """`--num-envs N --through-ros`: the episodes on N sim bridges through the nodes (lerobot_eval.ros_evaluation)."""
    import dataclasses

    from lerobot_eval import ros_evaluation
    from lerobot_policy_node.core.policies import RemotePolicy
    from lerobot_ros import vector_env
    from lerobot_ros.command import CommandError

    if not settings.start_bridge:
        raise CommandError("--through-ros starts its own sim bridges and nodes: drop --no-bridge")
    if isinstance(policy, RemotePolicy):
        raise CommandError(f"--through-ros serves every robot from one policy node; {policy.name} keeps one episode "
                           "state for every caller: evaluate it without --num-envs")  # fmt: skip
    try:  # each robot is a bridge process: the same machine limit as the in-process workers
        num_envs = vector_env.choose_num_envs(settings.num_envs or vector_env.AUTO, settings.episodes)
    except ValueError as err:
        raise CommandError(str(err)) from None
    visual = any(feature.visual for feature in policy.inputs)
    node_contract = contract.select([feature.key for feature in policy.inputs] + ["action"])
    cameras = settings.cameras if visual else ""  # no rendering the policy does not look at
    result = ros_evaluation.run_ros_episodes(
        settings=dataclasses.replace(settings, cameras=cameras), contract=node_contract, fps=fps,
        num_envs=num_envs, progress=progress,
    )  # fmt: skip
    totals: dict[str, Any] = {"accepted": 0, "rejected": 0, "max_boundary_step": 0.0, "max_inner_step": 0.0}
    for values in result["executors"]:
        totals["accepted"] += int(values.get("chunks_accepted", 0))
        # Chunks that arrive while the supervisor has an executor stopped (between episodes) are refused by design.
        stopped = int(values.get("rejected_disabled", 0))
        totals["rejected"] += int(values.get("chunks_rejected", 0)) - stopped
        totals["refused_while_stopped"] = totals.get("refused_while_stopped", 0) + stopped
        totals["max_boundary_step"] = max(totals["max_boundary_step"], values.get("max_boundary_step", 0.0))
        totals["max_inner_step"] = max(totals["max_inner_step"], values.get("max_inner_step", 0.0))
    report = _report(settings, contract, result["episodes"], totals, [], [])
    report["step_units"] = "radians (ROS units: the action executors' own counters)"
    sizes = {int(k): int(v) for k, v in (p.split(":") for p in result["policy"].get("batch_sizes", "").split(",") if p)}
    report.update(
        num_envs=num_envs, through_ros=True, mode="real time through ROS", wall_s=result["wall_s"],
        startup_s=result["total_s"] - result["wall_s"],
        episodes_per_minute=vector_env.episodes_per_minute(len(result["episodes"]), result["wall_s"]),
        policy_processes=result["policy_processes"], policy_batch_sizes={
            "counts": sizes, "batched": sum(n for k, n in sizes.items() if k > 1),
            "mean": sum(k * n for k, n in sizes.items()) / max(1, sum(sizes.values())), "max": max(sizes, default=0),
        },
    )  # fmt: skip
    return report


def run_evaluation(settings: EvalSettings, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run the episodes; returns the JSON-ready report (success rate, returns, chunk and inference statistics)."""
    from lerobot_ros.command import CommandError

    policy, contract = load_for_eval(settings)
    try:
        match_inputs(contract, policy.inputs)
    except ObservationError as err:
        raise CommandError(str(err)) from None
    contract = contract.select(_features_to_watch(contract, policy, settings.cameras))
    action = contract.features["action"]
    fps = float(policy.fps or contract.fps)
    period_ns = round(NS / fps)
    namespace = action.topic.rsplit("/", 1)[0] or "/"
    camera_key = next((key for key, f in contract.features.items() if f.is_visual), None)
    from lerobot_sim_bridge.errors import SimBridgeError
    from lerobot_sim_bridge.ros_env import RosRobotEnv

    if settings.num_envs is not None and settings.through_ros:
        return _run_through_ros(settings, policy, contract, fps, progress)
    if settings.through_ros:
        raise CommandError("--through-ros runs several robots at once: give --num-envs N (or --num-envs auto)")
    if settings.num_envs is not None:
        return _run_vector(settings, policy, contract, fps, camera_key, progress)
    bridge = _start_bridge(settings, namespace, fps) if settings.start_bridge else None

    episodes: list[dict[str, Any]] = []
    inference_s: list[float] = []
    totals = {"accepted": 0, "rejected": 0, "max_boundary_step": 0.0, "max_inner_step": 0.0}
    videos: list[str] = []
    env = None
    try:
        env = RosRobotEnv(contract, step_timeout=settings.step_timeout, discovery_timeout=60.0)
        for index in range(settings.episodes):
            observation, _ = env.reset(seed=settings.seed + index)
            policy.reset()
            executor = ChunkExecutor(
                ExecutorConfig(joint_names=tuple(action.dataset_names or ()), blend=BlendMode(settings.blend))
            )
            frames: list[np.ndarray] = []
            total, success, steps = 0.0, False, 0
            targets = hashlib.sha256()  # the commanded targets, bit for bit (serial and --num-envs compare equal)
            seen = hashlib.sha256()  # and every observation, camera frames included
            horizon = 0
            for step in range(settings.max_steps):
                now = step * period_ns
                plan = executor.plan
                left = 0 if plan is None else max(0, (plan.end_ns - now) // period_ns)
                if plan is None or left <= settings.threshold * max(horizon, 1):
                    start = time.perf_counter()
                    actions = np.asarray(policy.predict_chunk({**observation, "timestamp": now / NS}), dtype=np.float64)
                    inference_s.append(time.perf_counter() - start)
                    horizon = len(actions)
                    try:
                        executor.submit(Chunk(now, period_ns, actions, len(inference_s)), now)
                    except ChunkRejected as err:
                        progress(f"episode {index}: chunk rejected ({err}); holding")
                target = executor.target(now)
                if target is None:
                    raise CommandError("the policy produced no usable chunk for the first step of an episode")
                targets.update(np.asarray(target, dtype=np.float64).tobytes())
                for key in sorted(observation):
                    seen.update(np.ascontiguousarray(observation[key]).tobytes())
                if camera_key is not None and index < settings.videos:
                    frames.append(np.asarray(observation[camera_key], dtype=np.uint8))
                observation, reward, terminated, truncated, info = env.step(target)
                total += float(reward)
                success = success or bool(info.get("is_success", False))
                steps = step + 1
                if terminated or truncated:
                    break
            stats = executor.stats
            totals["accepted"] += stats.chunks_accepted
            totals["rejected"] += sum(stats.chunks_rejected.values())
            totals["max_boundary_step"] = max(totals["max_boundary_step"], stats.max_boundary_step)
            totals["max_inner_step"] = max(totals["max_inner_step"], stats.max_inner_step)
            episodes.append({"index": index, "seed": settings.seed + index, "return": total, "success": success,
                             "steps": steps, "chunks": stats.chunks_accepted,
                             "targets_sha256": targets.hexdigest(),
                             "observations_sha256": seen.hexdigest()})  # fmt: skip
            progress(f"episode {index}: {'success' if success else 'failure'}, return {total:.3f}, {steps} steps")
            if frames:
                path = settings.output_dir / f"episode_{index:03d}.mp4"
                _write_video(path, frames, fps)
                videos.append(str(path))
    except SimBridgeError as err:
        where = f"; the bridge's log: {settings.output_dir / 'sim_bridge.log'}" if bridge is not None else ""
        raise CommandError(f"evaluation stopped after {len(episodes)} episode(s): {err}{where}", exit_code=1) from None
    finally:
        if env is not None:
            env.close()
        if bridge is not None:
            bridge.terminate()
            try:
                bridge.wait(timeout=10)
            except subprocess.TimeoutExpired:
                bridge.kill()
                bridge.wait()
    return _report(settings, contract, episodes, totals, inference_s, videos)


def _report(
    settings: EvalSettings,
    contract: Any,
    episodes: list[dict[str, Any]],
    totals: dict[str, Any],
    inference_s: list[float],
    videos: list[str],
) -> dict[str, Any]:
    successes = sum(e["success"] for e in episodes)
    returns = [e["return"] for e in episodes]
    return {
        "checkpoint": settings.checkpoint,
        "contract": str(contract.source),
        "env_id": settings.env_id,
        "episodes": len(episodes),
        "successes": successes,
        "success_rate": successes / len(episodes) if episodes else 0.0,
        "mean_return": float(np.mean(returns)) if returns else 0.0,
        "returns": returns,
        "per_episode": episodes,
        "chunks": totals,
        "step_units": "dataset units of the contract's action (LeRobot's: degrees, gripper 0..100)",
        "inference_s": {
            "mean": float(np.mean(inference_s)) if inference_s else 0.0,
            "p99": float(np.percentile(inference_s, 99)) if inference_s else 0.0,
        },
        "blend": settings.blend,
        "threshold": settings.threshold,
        "videos": videos,
    }
