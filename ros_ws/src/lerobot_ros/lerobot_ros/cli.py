"""`lerobot-ros`: one entry point for the stack's command-line tools.

Sub-commands come from the `lerobot_ros.commands` entry-point group (see `command.py`), so each
package contributes its own verbs (launch, topic, node, bag2dataset, calibrate, ...).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from lerobot_ros.command import ENTRY_POINT_GROUP, Command, CommandError


def load_commands() -> dict[str, Command]:
    """Every registered command; one that fails to load is reported and left out, not fatal to the rest."""
    commands: dict[str, Command] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            command = ep.load()
        except Exception as err:  # a broken package must not take down every other command
            print(f"lerobot-ros: command '{ep.name}' unavailable ({ep.value}): {err}", file=sys.stderr)
            continue
        if not isinstance(command, Command):
            print(f"lerobot-ros: command '{ep.name}' unavailable: {ep.value} is not a Command", file=sys.stderr)
            continue
        commands[command.name] = command
    return dict(sorted(commands.items()))


def build_parser(commands: dict[str, Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lerobot-ros",
        description="LeRobot on ROS 2: launch robot stacks, inspect the graph, record and convert datasets.",
        epilog="Run `lerobot-ros COMMAND --help` for the options of one command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands.values():
        p = sub.add_parser(
            command.name,
            help=command.help,
            description=command.description or command.help,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(p)
        p.set_defaults(_command=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(load_commands())
    args = parser.parse_args(argv)
    command: Command = args._command
    try:
        return command.run(args)
    except CommandError as err:
        print(f"lerobot-ros {command.name}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
