"""`lerobot-ros dataset push ROOT REPO`: the `push` action of the `dataset` command (see hub.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lerobot_ros.command import CommandError

CODEBASE_VERSION = "v3.0"


def add_push_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `lerobot-ros dataset push ROOT REPO`."""
    parser.add_argument("root", type=Path, metavar="ROOT", help="dataset folder (holds meta/info.json)")
    parser.add_argument("repo", metavar="REPO", help="Hub dataset repo id, user_or_org/name")
    parser.add_argument("--private", action="store_true", help="create the repo private")
    parser.add_argument("--tag", default=CODEBASE_VERSION, help="tag to set on the pushed revision (default v3.0)")
    parser.add_argument("--branch", default=None, help="push to this branch (created if missing)")


def run_push(args: argparse.Namespace) -> int:
    """`lerobot-ros dataset push`: upload, then print the repo URL."""
    from lerobot_dataset.hub import HubError, push_dataset

    try:
        url = push_dataset(args.root, args.repo, private=args.private, tag=args.tag, branch=args.branch)
    except HubError as err:
        raise CommandError(str(err)) from None
    print(f"pushed {args.root} to {url} (tag {args.tag})")
    return 0
