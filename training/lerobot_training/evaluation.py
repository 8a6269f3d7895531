"""Rollouts of a policy in a gymnasium-style environment: success rate over K episodes.

The environment is anything with `reset(seed=...) -> (observation, info)` and
`step(action) -> (observation, reward, terminated, truncated, info)` whose observations are dicts keyed
by the policy's input features, in dataset units (the sim bridge's in-process `contract_sim_env`, the default;
its `RosRobotEnv` talks to a running bridge). An episode counts as a success when `info["is_success"]` is true
at its end, as in LeRobot's eval.

`evaluate` runs the episodes one after another in this process; `evaluate_vector` runs them N at a time on a
gymnasium vector env (`lerobot_ros.vector_env.make_vector_env`: one spawned worker per env, stepped in lockstep),
handing the next seed to whichever env finishes. Both run the same LeRobot-style rollout per episode (the
queue of `n_action_steps` actions and the `n_obs_steps` history of `Policy.select_action`, or ACT's temporal
ensembling, kept per env) and compute chunks with `Policy.predict_chunks`, whose chunk for an observation does
not depend on the other observations of its call (on the CPU): an episode depends only on its seed, so both give
the same per-seed outcomes (a policy that samples noise, diffusion, draws it per call and so differs between runs).
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from lerobot_training.policies.base import Policy

# The sim in this process (no bridge, no ROS graph), built from the dataset's contract: N copies run in parallel.
DEFAULT_ENV_FACTORY = "lerobot_sim_bridge.contract_env:contract_sim_env"


class GymEnv(Protocol):
    def reset(self, *, seed: int | None = None) -> tuple[Mapping[str, Any], dict[str, Any]]: ...

    def step(self, action: np.ndarray[Any, Any]) -> tuple[Mapping[str, Any], float, bool, bool, dict[str, Any]]: ...


@dataclass(frozen=True)
class EpisodeOutcome:
    seed: int
    success: bool
    reward: float
    steps: int


@dataclass(frozen=True)
class EvalResult:
    episodes: int
    successes: int
    mean_reward: float
    per_episode: tuple[EpisodeOutcome, ...] = field(default=(), compare=False)

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0


def find_env_factory(spec: str) -> Callable[..., Any] | None:
    """`module:attribute` named on the command line, or None when the module or attribute is absent."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    factory = getattr(module, attribute, None)
    return factory if callable(factory) else None


def accepts_argument(factory: Callable[..., Any], name: str) -> bool:
    """Whether `factory` takes a keyword argument `name` (e.g. RosRobotEnv's `contract`)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


class _Rollout:
    """One env's LeRobot-style rollout (what `Policy.select_action` keeps, per env): the queue of actions left from
    the last chunk and the observation history; with ACT's temporal ensembling, its own ensembler."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.queue: deque[torch.Tensor] = deque()
        self.history: deque[dict[str, torch.Tensor]] = deque(maxlen=policy.config.n_obs_steps)
        ensembler = getattr(policy, "temporal_ensembler", None)  # ACT's option: a new chunk every step, averaged
        self.ensembler = copy.deepcopy(ensembler) if ensembler is not None else None

    def reset(self) -> None:
        self.queue.clear()
        self.history.clear()
        if self.ensembler is not None:
            self.ensembler.reset()

    def observe(self, observation: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Take this step's observation; returns what to compute a chunk from when one is due, else None."""
        config = self.policy.config
        single = {key: value for key, value in observation.items() if key in config.input_features}
        stacked: Mapping[str, Any] = single
        if config.n_obs_steps > 1:
            step = {key: value[0, -1] for key, value in self.policy.prepare_observation(single).items()}
            while len(self.history) < config.n_obs_steps:
                self.history.append(step)  # LeRobot pads the history with the first frame
            self.history.append(step)
            stacked = {key: torch.stack([h[key] for h in self.history]) for key in step}
        return stacked if self.ensembler is not None or not self.queue else None

    def act(self, chunk: torch.Tensor | None) -> np.ndarray[Any, Any]:
        """This step's action, from `chunk` when one was computed for it."""
        if self.ensembler is not None:
            assert chunk is not None
            return np.asarray(self.ensembler.update(chunk).cpu().numpy())
        if chunk is not None:
            self.queue.extend(chunk[: self.policy.config.executed_steps])
        return np.asarray(self.queue.popleft().cpu().numpy())


def _chunks(policy: Policy, due: Sequence[Mapping[str, Any]]) -> list[torch.Tensor]:
    return list(policy.predict_chunks(due)) if due else []


def evaluate(policy: Policy, env: GymEnv, episodes: int, max_steps: int, seed: int) -> EvalResult:
    """Roll the policy out for `episodes` episodes of at most `max_steps` steps each, one after another."""
    outcomes = []
    was_training = policy.training
    policy.eval()
    rollout = _Rollout(policy)
    try:
        for episode in range(episodes):
            observation, _ = env.reset(seed=seed + episode)
            rollout.reset()
            total, info, steps = 0.0, dict[str, Any](), 0
            for _ in range(max_steps):
                due = rollout.observe(observation)
                chunks = _chunks(policy, [] if due is None else [due])
                action = rollout.act(chunks[0] if chunks else None)
                observation, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                steps += 1
                if terminated or truncated:
                    break
            outcomes.append(EpisodeOutcome(seed + episode, bool(info.get("is_success", False)), total, steps))
    finally:
        policy.train(was_training)
    return _result(outcomes)


def evaluate_vector(policy: Policy, envs: Any, episodes: int, max_steps: int, seed: int) -> EvalResult:
    """`evaluate` on a gymnasium vector env (`envs.num_envs` envs, autoreset off): every control step, the envs whose
    chunk is due get it from one batched policy call; an env that finishes its episode is reset (`reset_mask`)
    with the next seed. Per-seed outcomes equal `evaluate`'s (module docstring)."""
    count = int(envs.num_envs)
    seeds = [seed + i for i in range(episodes)]
    running: list[int | None] = [i if i < episodes else None for i in range(count)]
    rollouts = [_Rollout(policy) for _ in range(count)]
    totals = [0.0] * count
    steps = [0] * count
    outcomes: dict[int, EpisodeOutcome] = {}
    next_episode = min(count, episodes)
    was_training = policy.training
    policy.eval()
    try:
        observations, _ = envs.reset(seed=[seeds[i] if i is not None else None for i in running])
        actions: np.ndarray[Any, Any] | None = None
        while any(i is not None for i in running):
            due: list[tuple[int, Mapping[str, Any]]] = []
            for env, index in enumerate(running):
                if index is not None:
                    wanted = rollouts[env].observe({key: value[env] for key, value in observations.items()})
                    if wanted is not None:
                        due.append((env, wanted))
            chunks = dict(zip((env for env, _ in due), _chunks(policy, [obs for _, obs in due]), strict=True))
            for env, index in enumerate(running):
                if index is not None:
                    action = rollouts[env].act(chunks.get(env))
                    if actions is None:  # an env with no episode left repeats its last action (its result is unused)
                        actions = np.zeros((count, *action.shape), dtype=action.dtype)
                    actions[env] = action
            assert actions is not None
            observations, rewards, terminated, truncated, infos = envs.step(actions)
            reset = np.zeros(count, dtype=np.bool_)
            reset_seeds: list[int | None] = [None] * count
            for env, index in enumerate(running):
                if index is None:
                    continue
                totals[env] += float(rewards[env])
                steps[env] += 1
                if not (terminated[env] or truncated[env] or steps[env] >= max_steps):
                    continue
                success = bool(infos.get("is_success", np.zeros(count))[env]) and bool(
                    infos.get("_is_success", np.ones(count, dtype=np.bool_))[env]
                )
                outcomes[index] = EpisodeOutcome(seeds[index], success, totals[env], steps[env])
                running[env] = None
                if next_episode < episodes:
                    running[env], reset[env], reset_seeds[env] = next_episode, True, seeds[next_episode]
                    next_episode += 1
                    rollouts[env].reset()
                    totals[env], steps[env] = 0.0, 0
            if reset.any():
                fresh, _ = envs.reset(seed=reset_seeds, options={"reset_mask": reset})
                for key in observations:
                    observations[key][reset] = fresh[key][reset]
    finally:
        policy.train(was_training)
    return _result([outcomes[i] for i in sorted(outcomes)])


def _result(outcomes: list[EpisodeOutcome]) -> EvalResult:
    rewards = [o.reward for o in outcomes]
    return EvalResult(
        episodes=len(outcomes),
        successes=sum(o.success for o in outcomes),
        mean_reward=float(np.mean(rewards)) if rewards else 0.0,
        per_episode=tuple(outcomes),
    )
