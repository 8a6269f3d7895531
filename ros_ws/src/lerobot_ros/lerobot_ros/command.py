"""How a `lerobot-ros` sub-command is declared.

Packages add verbs to `lerobot-ros` through the entry-point group `lerobot_ros.commands`; each
entry point names a `Command`. Command modules must import only the standard library at module
level so that `lerobot-ros --help` stays fast; heavy imports go inside `run`.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

ENTRY_POINT_GROUP = "lerobot_ros.commands"


class CommandError(Exception):
    """A user-facing error: printed as one line, exit status 2 unless given."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (installed here, replacing rclpy's handlers): a command's loop polls it
    and stops cleanly instead of dying in the middle of a write or a move."""
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop
