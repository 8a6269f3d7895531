"""A gymnasium-style environment for the evaluation tests: observations shaped like the tiny dataset,
success on even seeds (so the expected success rate is known whatever the policy does)."""

from __future__ import annotations

from typing import Any

import numpy as np


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
