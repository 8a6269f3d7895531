"""`lerobot-ros policy-server CHECKPOINT --port P`: serve a policy's action chunks over gRPC.

The same server as `python -m lerobot_policy_server` (package lerobot_policy_server, numpy + grpcio only).
With LeRobot importable in this environment it runs any LeRobot policy type through LeRobot's own
`from_pretrained` and processors; otherwise this project's ACT / diffusion. A policy node uses it with
checkpoint:=grpc://HOST:PORT. Frames are typed and pickle-free: nothing received is ever executed.
"""

from __future__ import annotations

import argparse

from lerobot_ros.command import Command, CommandError


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    try:
        from lerobot_policy_server.cli import add_arguments
    except ImportError:
        parser.add_argument("rest", nargs=argparse.REMAINDER)  # `run` says what is missing
        return
    add_arguments(parser)


def _run(args: argparse.Namespace) -> int:
    try:
        from lerobot_policy_server.cli import run
    except ImportError as err:
        raise CommandError(f"the policy server package is not installed ({err}); run scripts/setup.sh") from None
    return run(args)


COMMAND = Command(
    name="policy-server",
    help="serve a checkpoint's action chunks over gRPC (any LeRobot policy where LeRobot is installed)",
    add_arguments=_add_arguments,
    run=_run,
    description=__doc__ or "",
)
