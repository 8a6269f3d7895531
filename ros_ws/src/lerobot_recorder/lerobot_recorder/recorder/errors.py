"""Errors raised by the live recorder's pure cores."""

from __future__ import annotations


class RecorderError(Exception):
    """Base class of the live recorder's errors."""


class WorkflowError(RecorderError):
    """An episode control came in a state where it means nothing (e.g. a goal while recording)."""


class TopicSelectionError(RecorderError, ValueError):
    """`bag record` was given no topics, or a regex that does not compile."""
