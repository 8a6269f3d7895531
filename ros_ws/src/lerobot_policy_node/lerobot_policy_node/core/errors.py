"""Typed errors of the policy runtime. Every message says what is wrong and how to fix it."""

from __future__ import annotations


class PolicyRuntimeError(Exception):
    """Base class of every error raised by `lerobot_policy_node`."""


class ChunkRejected(PolicyRuntimeError, ValueError):
    """An action chunk cannot be executed (wrong shape, NaN/inf, stale, from the future); the executor holds.

    `reason` is a short machine-readable tag (``shape``, ``non_finite``, ``stale``, ``future``, ``disabled``,
    ``period``) used to count rejections per kind.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PolicyConfigError(PolicyRuntimeError, ValueError):
    """A parameter of the policy node or the executor is invalid, or two of them contradict each other."""


class ObservationError(PolicyRuntimeError):
    """The contract cannot supply what the policy needs, or a message does not match the contract."""


class PolicyLoadError(PolicyRuntimeError):
    """A checkpoint directory or Hub repo cannot be loaded as a policy."""


class RemotePolicyError(PolicyRuntimeError):
    """A call to a policy server failed (unreachable, timed out, refused the observation, failed inside)."""
