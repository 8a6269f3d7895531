"""Typed errors of the training package.

Every message names the feature, field or file that is wrong and how to fix it. All errors derive from
`TrainingError`, so callers that do not care about the kind catch that one.
"""

from __future__ import annotations


class TrainingError(Exception):
    """Base class of every error raised by `lerobot_training`."""


class PolicyConfigError(TrainingError, ValueError):
    """A policy's configuration has an invalid value, or two values contradict each other: a field of a policy
    config (checkpoint, training run) or a parameter of the policy node or the action executor, which raise this
    same class (lerobot_policy_node.core.errors)."""


class FeatureMismatchError(TrainingError, ValueError):
    """A dataset or an observation lacks a feature the policy needs, or has it with another shape."""


class CheckpointError(TrainingError):
    """A checkpoint directory is missing a file, holds a corrupt file, or was written by an unknown/newer writer."""


class NormalizationError(TrainingError, ValueError):
    """Normalisation statistics are missing or unusable for a feature."""
