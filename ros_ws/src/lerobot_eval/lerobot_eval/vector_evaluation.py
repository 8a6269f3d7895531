"""`lerobot-ros eval --num-envs N`: N simulated episodes at once, in lockstep, without ROS.

The simulation runs as a gymnasium `AsyncVectorEnv` of `SimContractEnv` (the lockstep sim bridge and
`RosRobotEnv` in one process each: same controller, same contract conversion), one spawned worker per env, each
building its own MuJoCo model and renderer on its first reset. Every control step, the envs whose chunk is
running out (the same `--threshold` rule as the serial evaluation) get a new chunk from one policy call;
each env has its own `ChunkExecutor`, stamped on its own episode's step clock, so an episode's chunk execution
is the serial one. Episodes are handed out from the seed list as envs finish; the next seed is given to an env
before its episode ends, so it starts the next episode in the same step (`SimContractEnv.next_seed`).

Per-seed outcomes equal the serial evaluation's: an episode depends only on its seed (the sim resets from the
seed, the executor is new), and a checkpoint's chunk for an observation does not depend on which other
observations share its call (`CheckpointPolicy.predict_chunks`). A scripted policy gets one instance per env
(it keeps per-episode state); a policy behind `grpc://` is refused (one server, one episode state).

How many envs the machine holds and the vector env itself are `lerobot_ros.vector_env`'s (shared with the
trainer's periodic evaluation).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ChunkRejected
from lerobot_policy_node.core.executor import BlendMode, Chunk, ChunkExecutor, ExecutorConfig
from lerobot_policy_node.core.policies import CheckpointPolicy, ChunkPolicy, RemotePolicy
from lerobot_ros.vector_env import make_vector_env as default_vector_env


class BatchPolicy:
    """One policy answering several envs: a checkpoint in one call; other in-process policies (scripted ones keep
    per-episode state) one copy per env."""

    def __init__(self, policy: ChunkPolicy, num_envs: int) -> None:
        self.policy = policy
        self._copies: list[ChunkPolicy] | None = None
        if isinstance(policy, RemotePolicy):
            raise ValueError(
                f"--num-envs runs the policy in this process (a checkpoint or scripted); {policy.name} keeps one "
                "episode state for every caller: evaluate it without --num-envs"
            )
        if not isinstance(policy, CheckpointPolicy):
            self._copies = [copy.deepcopy(policy) for _ in range(num_envs)]

    def reset(self, env: int) -> None:
        """A new episode starts in `env`."""
        if self._copies is not None:
            self._copies[env].reset()
        else:
            self.policy.reset()

    def predict(self, requests: Sequence[tuple[int, dict[str, Any]]]) -> list[npt.NDArray[np.float64]]:
        """Chunks for `(env, observation)` pairs, in order."""
        if self._copies is not None:
            return [np.asarray(self._copies[env].predict_chunk(obs), dtype=np.float64) for env, obs in requests]
        assert isinstance(self.policy, CheckpointPolicy)
        return self.policy.predict_chunks([obs for _, obs in requests])


@dataclass
class _Episode:
    """One env's episode in progress: the serial evaluation's per-episode state."""

    index: int
    seed: int
    executor: ChunkExecutor
    step: int = 0
    total: float = 0.0
    success: bool = False
    horizon: int = 0
    frames: list[np.ndarray] = field(default_factory=list)
    targets: Any = field(default_factory=hashlib.sha256)
    observations: Any = field(default_factory=hashlib.sha256)


@dataclass(frozen=True)
class VectorEvalResult:
    """Episodes (in index order), executor totals, inference times, and the batch sizes the policy saw."""

    episodes: list[dict[str, Any]]
    totals: dict[str, Any]
    inference_s: list[float]
    batch_sizes: list[int]
    frames: dict[int, list[np.ndarray]]
    wall_s: float


def _without_worker_warnings(run: Callable[..., VectorEvalResult]) -> Callable[..., VectorEvalResult]:
    """gymnasium logs a worker's traceback as warnings before re-raising its exception here; the caller reports the
    exception itself (one line), so those warnings are not shown."""

    @functools.wraps(run)
    def quiet(*args: Any, **kwargs: Any) -> VectorEvalResult:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module=r"gymnasium\.vector\.async_vector_env")
            return run(*args, **kwargs)

    return quiet


@_without_worker_warnings
def run_vector_episodes(
    *,
    policy: ChunkPolicy,
    env_factory: Callable[[], Any],
    num_envs: int,
    seeds: Sequence[int],
    max_steps: int,
    period_ns: int,
    joint_names: tuple[str, ...],
    blend: str,
    threshold: float,
    camera_key: str | None,
    videos: int,
    progress: Callable[[str], None],
    make_vector_env: Callable[[int, Callable[[], Any]], Any] | None = None,
) -> VectorEvalResult:
    """Run one episode per seed on `num_envs` envs of `env_factory` in lockstep (see the module docstring)."""
    num_envs = min(num_envs, len(seeds))
    batch_policy = BatchPolicy(policy, num_envs)
    started = time.perf_counter()
    envs = (make_vector_env or default_vector_env)(num_envs, env_factory)
    episodes: dict[int, dict[str, Any]] = {}
    frames: dict[int, list[np.ndarray]] = {}
    inference_s: list[float] = []
    batch_sizes: list[int] = []
    totals: dict[str, Any] = {"accepted": 0, "rejected": 0, "max_boundary_step": 0.0, "max_inner_step": 0.0}
    action_size = len(joint_names)

    def new_episode(env: int, index: int) -> _Episode:
        batch_policy.reset(env)
        config = ExecutorConfig(joint_names=joint_names, blend=BlendMode(blend))
        return _Episode(index=index, seed=seeds[index], executor=ChunkExecutor(config))

    try:
        observations, _ = envs.reset(seed=[int(s) for s in seeds[:num_envs]])
        running: list[_Episode | None] = [new_episode(env, env) for env in range(num_envs)]
        next_index = num_envs
        queued: list[int | None] = [None] * num_envs
        for env in range(num_envs):
            if next_index < len(seeds):
                queued[env] = next_index
                next_index += 1
        envs.set_attr("next_seed", [None if q is None else int(seeds[q]) for q in queued])
        chunk_count = 0
        while any(e is not None for e in running):
            requests: list[tuple[int, dict[str, Any]]] = []
            for env, episode in enumerate(running):
                if episode is None:
                    continue
                now = episode.step * period_ns
                plan = episode.executor.plan
                left = 0 if plan is None else max(0, (plan.end_ns - now) // period_ns)
                if plan is None or left <= threshold * max(episode.horizon, 1):
                    observation = {key: value[env] for key, value in observations.items()}
                    requests.append((env, {**observation, "timestamp": now / NS}))
            if requests:
                start = time.perf_counter()
                chunks = batch_policy.predict(requests)
                inference_s.append(time.perf_counter() - start)
                batch_sizes.append(len(requests))
                for (env, _), actions in zip(requests, chunks, strict=True):
                    episode = running[env]
                    assert episode is not None
                    now = episode.step * period_ns
                    episode.horizon = len(actions)
                    chunk_count += 1
                    try:
                        episode.executor.submit(Chunk(now, period_ns, actions, chunk_count), now)
                    except ChunkRejected as err:
                        progress(f"episode {episode.index}: chunk rejected ({err}); holding")
            targets = np.zeros((num_envs, action_size), dtype=np.float64)
            for env, episode in enumerate(running):
                if episode is None:
                    continue
                target = episode.executor.target(episode.step * period_ns)
                if target is None:
                    raise ValueError("the policy produced no usable chunk for the first step of an episode")
                targets[env] = target
                episode.targets.update(np.asarray(target, dtype=np.float64).tobytes())
                for key in sorted(observations):
                    episode.observations.update(np.ascontiguousarray(observations[key][env]).tobytes())
                if camera_key is not None and episode.index < videos:
                    episode.frames.append(np.asarray(observations[camera_key][env], dtype=np.uint8))
            observations, rewards, terminated, truncated, infos = envs.step(targets)
            refill: list[int] = []
            for env, episode in enumerate(running):
                if episode is None:
                    continue
                episode.total += float(rewards[env])
                episode.success = episode.success or bool(infos["is_success"][env])
                episode.step += 1
                if not (terminated[env] or truncated[env] or episode.step >= max_steps):
                    continue
                _finish(episode, episodes, frames, totals, progress)
                index = queued[env]
                if index is not None and "next_episode_seed" in infos and infos["_next_episode_seed"][env]:
                    running[env] = new_episode(env, index)
                    queued[env] = None
                    if next_index < len(seeds):
                        queued[env] = next_index
                        next_index += 1
                        refill.append(env)
                elif index is not None:
                    raise RuntimeError(f"env {env} ended episode {episode.index} without starting seed {seeds[index]}")
                else:
                    running[env] = None
            if refill:
                envs.set_attr("next_seed", [None if q is None else int(seeds[q]) for q in queued])
    finally:
        envs.close()
    return VectorEvalResult(
        episodes=[episodes[i] for i in sorted(episodes)],
        totals=totals,
        inference_s=inference_s,
        batch_sizes=batch_sizes,
        frames=frames,
        wall_s=time.perf_counter() - started,
    )


def _finish(
    episode: _Episode,
    episodes: dict[int, dict[str, Any]],
    frames: dict[int, list[np.ndarray]],
    totals: dict[str, Any],
    progress: Callable[[str], None],
) -> None:
    stats = episode.executor.stats
    totals["accepted"] += stats.chunks_accepted
    totals["rejected"] += sum(stats.chunks_rejected.values())
    totals["max_boundary_step"] = max(totals["max_boundary_step"], stats.max_boundary_step)
    totals["max_inner_step"] = max(totals["max_inner_step"], stats.max_inner_step)
    episodes[episode.index] = {"index": episode.index, "seed": episode.seed, "return": episode.total,
                               "success": episode.success, "steps": episode.step,
                               "chunks": stats.chunks_accepted,
                               "targets_sha256": episode.targets.hexdigest(),
                               "observations_sha256": episode.observations.hexdigest()}  # fmt: skip
    if episode.frames:
        frames[episode.index] = episode.frames
    progress(
        f"episode {episode.index}: {'success' if episode.success else 'failure'}, return {episode.total:.3f}, "
        f"{episode.step} steps"
    )


def contract_env_factory(env_id: str, contract: Any, fps: float, cameras: str, max_steps: int) -> Callable[[], Any]:
    """A picklable factory of the `SimContractEnv` the lockstep bridge of `lerobot-ros eval` would be."""
    from lerobot_sim_bridge.contract_env import SimContractEnv

    return functools.partial(SimContractEnv, env_id, contract.to_dict(), fps, cameras, max_steps)
