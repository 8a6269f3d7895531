"""A gymnasium-style environment for the evaluation tests: observations shaped like the tiny dataset,
success on even seeds (so the expected success rate is known whatever the policy does)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces


class EvenSeedEnv:
    def __init__(self, episode_length: int = 3) -> None:
        self.episode_length = episode_length
        self.steps = 0
        self.seed = 0
        self.actions: list[np.ndarray[Any, Any]] = []

    def _observation(self) -> dict[str, Any]:
        return {
            "observation.state": np.array([0.1 * self.steps, 0.0, 1.0], dtype=np.float32),
            "observation.images.front": np.zeros((32, 48, 3), dtype=np.uint8),
            "observation.environment_state": np.array([0.0, 1.0], dtype=np.float32),
        }

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self.seed, self.steps = seed or 0, 0
        return self._observation(), {}

    def step(self, action: np.ndarray[Any, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.actions.append(action)
        self.steps += 1
        done = self.steps >= self.episode_length
        success = done and self.seed % 2 == 0
        return self._observation(), float(success), done, False, {"is_success": success}


class UnreachableRobotEnv:
    """Takes the contract like RosRobotEnv and then times out, as when no sim bridge runs."""

    contracts: list[str] = []  # noqa: RUF012

    def __init__(self, contract: str) -> None:
        UnreachableRobotEnv.contracts.append(contract)

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        raise TimeoutError("no observation within 10 s; is the sim bridge running?")

    def step(self, action: np.ndarray[Any, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        raise AssertionError("never reached")


class SeededReachEnv(gymnasium.Env[dict[str, np.ndarray[Any, Any]], np.ndarray[Any, Any]]):
    """A gymnasium env for the vector evaluation (spaces, so it runs in gymnasium's AsyncVectorEnv workers) whose
    outcome depends on the policy: the state integrates the actions, the reward is the action's first value (so
    equal returns mean equal actions), and an episode succeeds when the state's first value ends above a target
    drawn from the seed; episodes end after 3 + seed % 4 steps, so envs finish at different times."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Dict(  # type: ignore[assignment]
            {
                "observation.state": spaces.Box(-np.inf, np.inf, (3,), dtype=np.float32),
                "observation.environment_state": spaces.Box(-np.inf, np.inf, (2,), dtype=np.float32),
            }
        )
        self.action_space = spaces.Box(-np.inf, np.inf, (3,), dtype=np.float32)
        self.state = np.zeros(3, dtype=np.float32)
        self.target, self.length, self.steps = 0.0, 3, 0

    def _observation(self) -> dict[str, np.ndarray[Any, Any]]:
        return {
            "observation.state": self.state.copy(),
            "observation.environment_state": np.array([self.target, self.steps], dtype=np.float32),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, Any]]:
        rng = np.random.default_rng(seed)
        self.state = rng.uniform(-1.0, 1.0, 3).astype(np.float32)
        self.target, self.length, self.steps = float(rng.uniform(-1.0, 1.0)), 3 + (seed or 0) % 4, 0
        return self._observation(), {}

    def step(
        self, action: np.ndarray[Any, Any]
    ) -> tuple[dict[str, np.ndarray[Any, Any]], float, bool, bool, dict[str, Any]]:
        values = np.asarray(action, dtype=np.float32)
        self.state = (self.state + 0.1 * values).astype(np.float32)
        self.steps += 1
        done = self.steps >= self.length
        success = done and float(self.state[0]) > self.target
        return self._observation(), float(values[0]), done, False, {"is_success": success}
