"""`lerobot-ros dds`: show the DDS profile in use, print the environment, clean stale segments."""

from __future__ import annotations

import argparse

from lerobot_ros.command import Command, CommandError


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (
        ("profile", "print the path of the Fast DDS profile the stack uses"),
        ("env", "print `export` lines that apply the stack's ROS environment to a shell"),
    ):
        action_parser = sub.add_parser(action, help=text)
        action_parser.add_argument(
            "--profile",
            choices=["shm", "multihost"],
            default=None,
            help="shm: one host (default, or $LEROBOT_ROS_DDS); multihost: the stack split over hosts "
            "(shared memory inside a host, UDP between hosts)",
        )
    sub.add_parser("clean", help="remove shared-memory segments left in /dev/shm by dead DDS processes")


def _run(args: argparse.Namespace) -> int:
    from lerobot_ros import dds

    try:
        return _act(args)
    except dds.DdsProfileError as err:
        raise CommandError(str(err)) from None


def _act(args: argparse.Namespace) -> int:
    from lerobot_ros import dds

    if args.action == "profile":
        print(dds.profile_path(args.profile))
    elif args.action == "env":
        env = dds.ros_environment({}, profile=args.profile)
        for key in sorted(env):
            print(f"export {key}={env[key]}")
    else:
        report = dds.clean_stale_shm()
        print(f"removed {len(report.removed)} stale files, {report.in_use} segments/ports in use")
    return 0


COMMAND = Command(
    name="dds",
    help="DDS transport profile and shared-memory cleanup",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
