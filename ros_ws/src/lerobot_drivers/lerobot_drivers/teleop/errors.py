"""Errors raised by the teleoperation cores."""

from __future__ import annotations


class TeleopError(ValueError):
    """Teleoperation cannot run as configured; the message says what is wrong and how to fix it."""


class IncompatibleArmsError(TeleopError):
    """The leader arm cannot drive this follower (another robot type)."""
