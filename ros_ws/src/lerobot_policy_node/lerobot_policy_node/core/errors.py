"""Typed errors of the policy runtime. Every message says what is wrong and how to fix it.

`PolicyConfigError` is training's (one class for a checkpoint's config field and a node parameter; the training
package's errors module is pure Python and loads no torch), so `except PolicyConfigError` catches both.
"""

from __future__ import annotations

from lerobot_training.errors import PolicyConfigError

__all__ = [
    "ChunkRejected",
    "ObservationError",
    "PolicyConfigError",
    "PolicyLoadError",
    "PolicyRuntimeError",
    "RemotePolicyError",
]


class PolicyRuntimeError(Exception):
    """Base class of the errors raised by `lerobot_policy_node` (PolicyConfigError, shared with training, aside)."""


class ChunkRejected(PolicyRuntimeError, ValueError):
    """An action chunk cannot be executed (wrong shape, NaN/inf, stale, from the future); the executor holds.

    `reason` is a short machine-readable tag (``shape``, ``non_finite``, ``stale``, ``future``, ``disabled``,
    ``period``) used to count rejections per kind.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ObservationError(PolicyRuntimeError):
    """The contract cannot supply what the policy needs, or a message does not match the contract."""


class PolicyLoadError(PolicyRuntimeError):
    """A checkpoint directory or Hub repo cannot be loaded as a policy."""


class RemotePolicyError(PolicyRuntimeError):
    """A call to a policy server failed (unreachable, timed out, refused the observation, failed inside)."""
