"""Errors raised by the camera sources and the capture thread."""

from __future__ import annotations


class CameraError(RuntimeError):
    """Base class of camera errors; the message says what is wrong and how to fix it."""


class CameraNotFoundError(CameraError):
    """The device (index, path or file) does not exist or cannot be opened."""


class UnsupportedModeError(CameraError):
    """The camera does not deliver the requested width/height/fps/fourcc; the message lists what it does."""


class CameraDisconnectedError(CameraError):
    """The device stopped delivering frames (unplugged, file gone): the capture thread reconnects."""
