"""`python -m lerobot_policy_server CHECKPOINT --port P` (also `lerobot-ros policy-server`).

The server listens on loopback unless `--host` names another address; there it refuses to start unless callers
authenticate, with a token (`--token-file` or LEROBOT_POLICY_SERVER_TOKEN) or a client certificate (mutual TLS:
`--tls-client-ca`), unless `--insecure`; TLS alone encrypts but lets anyone in.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lerobot_policy_server.admission import ServerLimits
from lerobot_policy_server.protocol import DEFAULT_PORT
from lerobot_policy_server.security import TOKEN_ENV, SecurityError, ServerSecurity, is_loopback, read_token

_LIMITS = ServerLimits()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="checkpoint directory (config.json, weights, processors) or Hub repo id")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0 = any)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 / :: = every interface)",
    )
    parser.add_argument("--token-file", default="", help=f"file holding the token callers must send (or ${TOKEN_ENV})")
    parser.add_argument("--tls-cert", default="", help="TLS: this server's certificate chain (PEM)")
    parser.add_argument("--tls-key", default="", help="TLS: the certificate's private key (PEM)")
    parser.add_argument("--tls-client-ca", default="", help="mutual TLS: CA (PEM) whose client certificates are let in")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="listen beyond loopback without authentication (anyone who reaches the port can use the policy)",
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=_LIMITS.max_concurrent,
        help="calls served at once, default %(default)s; more are refused",
    )
    parser.add_argument("--max-request-bytes", type=int, default=0, help="largest request (default: inputs + 1 MiB)")
    parser.add_argument(
        "--max-connections",
        type=int,
        default=_LIMITS.max_connections,
        help="client connections held at once (default %(default)s)",
    )
    parser.add_argument(
        "--max-connections-per-peer",
        type=int,
        default=_LIMITS.max_connections_per_peer,
        help="connections held at once from one client address, beyond loopback (default %(default)s)",
    )
    parser.add_argument(
        "--handshake-timeout",
        type=float,
        default=_LIMITS.handshake_timeout_s,
        help="beyond loopback, close a connection that has made no authenticated call this long (s, default "
        "%(default)s)",
    )
    parser.add_argument(
        "--max-peer-failures",
        type=int,
        default=_LIMITS.max_peer_failures,
        help="beyond loopback, an address failing more often than this within "
        f"{_LIMITS.peer_failure_window_s:g} s (calls refused for the token, connections that make no "
        "authenticated call within --handshake-timeout or go beyond --max-connections-per-peer) is refused for "
        "--ban-time (default %(default)s)",
    )
    parser.add_argument(
        "--ban-time",
        type=float,
        default=_LIMITS.ban_s,
        help="how long such an address's connections are refused (s, default %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=_LIMITS.idle_timeout_s,
        help="close a connection idle this long (s, default %(default)s)",
    )
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
        security = ServerSecurity(
            read_token(args.token_file), args.tls_cert, args.tls_key, args.tls_client_ca, insecure=args.insecure
        )
        limits = ServerLimits(
            max_concurrent=args.max_concurrent,
            max_request_bytes=args.max_request_bytes,
            max_connections=args.max_connections,
            max_connections_per_peer=args.max_connections_per_peer,
            idle_timeout_s=args.idle_timeout,
            handshake_timeout_s=args.handshake_timeout,
            max_peer_failures=args.max_peer_failures,
            ban_s=args.ban_time,
        )
    except ValueError as err:  # SecurityError included
        print(f"policy-server: error: {err}", file=sys.stderr)
        return 2
    beyond = not is_loopback(args.host)
    refusal = security.refusal(args.host)
    if refusal:
        print(f"policy-server: error: {refusal}", file=sys.stderr)
        return 2
    try:
        policy = load_backend(args.checkpoint, args.backend, args.device, args.seed, args.robot_type)
    except LoadError as err:
        print(f"policy-server: error: {err}", file=sys.stderr)
        return 2
    try:
        server, port = start_server(policy, args.host, args.port, security, limits)
    except (OSError, RuntimeError, SecurityError) as err:
        print(f"policy-server: error: {err}", file=sys.stderr)
        return 2
    if beyond:
        missing = security.missing()
        print(
            f"policy-server: listening beyond this machine on {args.host}:{port} ({security.describe()})"
            + (f": {missing}" if missing else ""),
            flush=True,
        )
    info = policy.info
    inputs = ", ".join(f"{f.key} {f.dtype}{list(f.shape)}" for f in info.inputs)
    versions = ", ".join(f"{name} {version}" for name, version in info.versions.items())
    print(
        f"policy-server: serving {info.policy_type} ({info.backend}, {info.device}) from {args.checkpoint} on "
        f"{args.host}:{port}; inputs: {inputs}; {info.horizon} x {info.action_dim} actions; {versions}",
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
