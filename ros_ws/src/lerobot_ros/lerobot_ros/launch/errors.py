"""Errors of the launch runner.

Every error a user can cause in a launch file carries where it happened (file, line, tag) and
renders as one line: `FILE:LINE: TAG: what is wrong; what to do`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Location:
    """Where an entity sits in a launch file: the file, the 1-based line, the tag."""

    path: Path
    line: int
    tag: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.tag}"


class LaunchError(Exception):
    """Base class of the launch runner's errors."""


class LaunchFileError(LaunchError):
    """A launch file (or a command-line argument for it) is wrong; the message says where and how to fix it."""

    def __init__(self, location: Location, message: str) -> None:
        super().__init__(f"{location}: {message}")
        self.location = location
        self.message = message


class SubstitutionError(LaunchError):
    """A `$(...)` substitution cannot be parsed or evaluated (no location: the caller adds it)."""


class PackageNotFoundError(LaunchError):
    """A package is neither in the ament index nor an installed Python distribution."""


class ExecutableNotFoundError(LaunchError):
    """A package has no executable of the requested name."""
