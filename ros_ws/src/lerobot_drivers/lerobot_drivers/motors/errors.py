"""Errors raised by the motor buses and the calibration code.

Every message says what was found and what was expected, so a user can fix the cause without reading code.
"""

from __future__ import annotations


class MotorError(Exception):
    """Base class of every error raised by `lerobot_drivers.motors`."""


class PortError(MotorError):
    """The serial port cannot be opened (missing, busy, no permission)."""


class BusCommunicationError(MotorError):
    """A transaction failed; retrying may help (a reply was lost or damaged)."""


class NoReplyError(BusCommunicationError):
    """A motor did not answer within the timeout."""

    def __init__(self, message: str, motor_ids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.motor_ids = motor_ids


class CorruptReplyError(BusCommunicationError):
    """A reply arrived with a bad checksum, a bad header or an unexpected length."""


class DisconnectedError(MotorError):
    """The serial device went away (USB unplugged, adapter reset). Retrying on the same handle cannot help."""


class MotorSetupError(MotorError):
    """The motors on the bus are not the ones the arm description expects (missing id, wrong model, baud rate)."""


class CalibrationError(MotorError):
    """A calibration file is missing, malformed, for another robot, or holds values the motors cannot take."""
