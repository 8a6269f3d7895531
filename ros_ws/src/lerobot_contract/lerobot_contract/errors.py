"""Errors raised by the shared data model: the contract, the alignment rule and the live sampler."""

from __future__ import annotations


class ContractError(ValueError):
    """A contract file is invalid: names the file, the key and what is wrong."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        # One line even when a key from the file holds a line break.
        super().__init__(f"contract {source}: {key}: {problem}".replace("\n", "\\n"))


class MessageMismatchError(ValueError):
    """A message does not fit the contract feature it is converted for (missing joint, field, bad encoding)."""


class NonFiniteValueError(MessageMismatchError):
    """A message carries NaN or +-inf in a value the contract selects: the sample is refused, never stored."""


class NonMonotonicStampError(ValueError):
    """A topic's stamps go backwards, so "newest sample at or before the frame time" is undefined."""


class ClockJumpError(Exception):
    """A stamp (or the clock) went back by more than the allowed jitter: the clock was reset (sim reset)."""
