"""`python -m lerobot_policy_server CHECKPOINT --port P` (also `lerobot-ros policy-server`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lerobot_policy_server.protocol import DEFAULT_PORT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="checkpoint directory (config.json, weights, processors) or Hub repo id")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0 = any)")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default: every interface)")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, mps)")
    parser.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "lerobot", "lerobot_training"),
        help="auto: LeRobot's own classes when `lerobot` is importable here, else lerobot_training",
    )
    parser.add_argument("--robot-type", default="", help="robot_type put in the observation (as lerobot-record)")
    parser.add_argument(
        "--seed", type=int, default=None, help="re-seed torch before every chunk (reproducible sampling, for tests)"
    )


def run(args: argparse.Namespace) -> int:
    """Load, serve until SIGINT/SIGTERM; a load error is one line on stderr and exit status 2."""
    from lerobot_policy_server.backends import LoadError, load_backend
    from lerobot_policy_server.service import serve_forever, start_server

    try:
        policy = load_backend(args.checkpoint, args.backend, args.device, args.seed, args.robot_type)
    except LoadError as err:
        print(f"policy-server: error: {err}", file=sys.stderr)
        return 2
    try:
        server, port = start_server(policy, args.host, args.port)
    except (OSError, RuntimeError) as err:
        print(f"policy-server: error: {err}", file=sys.stderr)
        return 2
    info = policy.info
    inputs = ", ".join(f"{f.key} {f.dtype}{list(f.shape)}" for f in info.inputs)
    print(
        f"policy-server: serving {info.policy_type} ({info.backend}, {info.device}) from {info.name} on "
        f"{args.host}:{port}; inputs: {inputs}; {info.horizon} x {info.action_dim} actions",
        flush=True,
    )
    serve_forever(server)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lerobot-policy-server",
        description="Serve a LeRobot policy's action chunks over gRPC (typed, pickle-free frames).",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
