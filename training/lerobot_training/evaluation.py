"""Rollouts of a policy in a gymnasium-style environment: success rate over K episodes.

The environment is anything with `reset(seed=...) -> (observation, info)` and
`step(action) -> (observation, reward, terminated, truncated, info)` whose observations are dicts keyed
by the policy's input features (the sim bridge's `RosRobotEnv` is the intended one). An episode
counts as a success when `info["is_success"]` is true at its end, as in LeRobot's eval.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from lerobot_training.policies.base import Policy

DEFAULT_ENV_FACTORY = "lerobot_sim_bridge.ros_env:RosRobotEnv"


class GymEnv(Protocol):
    def reset(self, *, seed: int | None = None) -> tuple[Mapping[str, Any], dict[str, Any]]: ...

    def step(self, action: np.ndarray[Any, Any]) -> tuple[Mapping[str, Any], float, bool, bool, dict[str, Any]]: ...


@dataclass(frozen=True)
class EvalResult:
    episodes: int
    successes: int
    mean_reward: float

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


def evaluate(policy: Policy, env: GymEnv, episodes: int, max_steps: int, seed: int) -> EvalResult:
    """Roll the policy out for `episodes` episodes of at most `max_steps` steps each."""
    successes, rewards = 0, []
    was_training = policy.training
    policy.eval()
    try:
        for episode in range(episodes):
            observation, _ = env.reset(seed=seed + episode)
            policy.reset()
            total, info = 0.0, dict[str, Any]()
            for _ in range(max_steps):
                with torch.no_grad():
                    action = policy.select_action(observation).cpu().numpy()
                observation, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                if terminated or truncated:
                    break
            successes += int(bool(info.get("is_success", False)))
            rewards.append(total)
    finally:
        policy.train(was_training)
    return EvalResult(episodes, successes, float(np.mean(rewards)) if rewards else 0.0)
