"""What the server admits: limits on calls, request sizes and connections, and the counts of what it refused.

A call is authenticated before it takes anything: `Gate` checks the token while gRPC looks the call's handler up
(its polling thread, before any worker), and a caller without the token is refused UNAUTHENTICATED on a
refusal thread of its own (`REFUSAL_THREADS`), never on one of the `max_concurrent` workers and never counted
against them. An authenticated call beyond `max_concurrent` running calls is refused RESOURCE_EXHAUSTED the
same way, without queueing: the worker pool has exactly `max_concurrent` threads, so an admitted call never
waits for one. gRPC core refuses a message over `max_request_bytes` (RESOURCE_EXHAUSTED) before it is buffered.

Connections are bounded per peer and in total by `front.ConnectionFront` where the server listens beyond
loopback: see that module. gRPC core closes a connection idle for `idle_timeout_s` and, as a backstop behind the
front, one that has not finished its HTTP/2 handshake within `handshake_timeout_s`.

gRPC core also cancels calls (CANCELLED) that wait for the Python layer to take them once more than
``grpc.server.max_pending_requests`` (default 1000; up to 3000) are waiting: 10,000 concurrent calls on one
connection hit it. Here the pending limit is `max_connections` x `pending_per_connection`, so up to that many
calls at once are each answered: served, or refused. (Limiting HTTP/2 streams per connection instead made
bursts meet REFUSED_STREAM, UNAVAILABLE at the client.)
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import asdict, dataclass
from typing import Any

import grpc
import numpy as np

from lerobot_policy_server import protocol
from lerobot_policy_server.protocol import FeatureSpec
from lerobot_policy_server.security import NO_TOKEN, WRONG_TOKEN, token_problem

# Header and task text allowed on top of a request's tensors.
REQUEST_OVERHEAD_BYTES = 1024 * 1024
# Threads that answer refused calls (UNAUTHENTICATED, RESOURCE_EXHAUSTED): apart from the workers.
REFUSAL_THREADS = 2
COUNTS = (
    "calls",
    "refused_unauthenticated",
    "refused_busy",
    "refused_too_large",
    "malformed",
    "failed",
    "connections",
    "refused_connections",
    "evicted_connections",
    "closed_before_a_call",
    "banned_peers",
)


@dataclass(frozen=True)
class ServerLimits:
    """Limits of one server; `max_request_bytes` 0: the policy's inputs as raw tensors + `REQUEST_OVERHEAD_BYTES`."""

    max_concurrent: int = 8
    max_request_bytes: int = 0
    max_connections: int = 16
    max_connections_per_peer: int = 4  # connections of one client address (the front, beyond loopback)
    pending_per_connection: int = 1000  # calls of one connection that may wait for a worker
    idle_timeout_s: float = 300.0
    max_connection_age_s: float = 0.0  # 0: no limit
    handshake_timeout_s: float = 5.0  # a connection with no authenticated call by then is closed (the front)
    # The front bans an address failing more often than this within peer_failure_window_s: a call refused
    # UNAUTHENTICATED, a connection closed for the handshake window or refused beyond max_connections_per_peer.
    max_peer_failures: int = 10
    peer_failure_window_s: float = 10.0
    ban_s: float = 60.0  # how long a banned address's connections are refused at accept

    def __post_init__(self) -> None:
        for name in (
            "max_concurrent",
            "max_connections",
            "max_connections_per_peer",
            "pending_per_connection",
            "max_peer_failures",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("idle_timeout_s", "handshake_timeout_s", "peer_failure_window_s", "ban_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 s, got {getattr(self, name)}")
        if self.max_request_bytes < 0 or self.max_connection_age_s < 0:
            raise ValueError("max_request_bytes and max_connection_age_s must be >= 0")

    def request_bytes(self, inputs: Iterable[FeatureSpec]) -> int:
        """The largest request frame admitted for a policy with these inputs."""
        if self.max_request_bytes:
            return min(self.max_request_bytes, protocol.MAX_MESSAGE_BYTES)
        raw = sum(math.prod(spec.shape) * np.dtype(spec.dtype).itemsize for spec in inputs)
        return min(raw + REQUEST_OVERHEAD_BYTES, protocol.MAX_MESSAGE_BYTES)

    def grpc_options(self, request_bytes: int, fronted: bool = False) -> list[tuple[str, int]]:
        """The server's gRPC channel arguments; `fronted`: behind a `ConnectionFront`, which enforces
        `max_connections` (gRPC core's own cap is then a backstop with room for connections still closing)."""
        pending = self.max_connections * self.pending_per_connection + 1
        options = [
            ("grpc.max_receive_message_length", request_bytes),
            ("grpc.max_send_message_length", protocol.MAX_MESSAGE_BYTES),
            ("grpc.max_allowed_incoming_connections", self.max_connections * (2 if fronted else 1)),
            ("grpc.max_connection_idle_ms", round(self.idle_timeout_s * 1000)),
            ("grpc.server_handshake_timeout_ms", round(self.handshake_timeout_s * 1000)),
            ("grpc.server.max_pending_requests", pending),
            ("grpc.server.max_pending_requests_hard_limit", pending),
        ]
        if self.max_connection_age_s:
            options += [
                ("grpc.max_connection_age_ms", round(self.max_connection_age_s * 1000)),
                ("grpc.max_connection_age_grace_ms", 1000),
            ]
        return options


class ServerStats:
    """Counts of calls and of what was refused (thread-safe); `snapshot` for the Stats reply."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTS, 0)

    def count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class CallPool(futures.ThreadPoolExecutor):
    """The server's worker pool; `running` counts the calls it holds (submitted, not finished).

    Only admitted calls reach it (refusals run on the refusal pool, see `Gate`). gRPC submits from its one
    polling thread, right after `Gate.service` looked the call up, so the count `Gate` reads is exact there."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="policy_server")
        self._count_lock = threading.Lock()
        self.running = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        with self._count_lock:
            self.running += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: futures.Future[Any]) -> None:
        with self._count_lock:
            self.running -= 1


class Gate(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Finds a call's handler: the token first, then a free worker; refusals never take a worker.

    gRPC runs the lookup in its polling thread before anything else happens to the call. A call without this
    server's token is answered UNAUTHENTICATED, and an authenticated one beyond `max_concurrent` running calls
    RESOURCE_EXHAUSTED, both by a handler that runs on `refusals` (gRPC's per-handler `experimental_thread_pool`),
    so callers without the token cost the workers nothing. `authorized(peer)` is told the gRPC peer of every
    connection that carried an admitted call (the front keeps those connections), `unauthenticated(peer)` that
    of every call refused UNAUTHENTICATED (the front bans an address that fails too often).
    """

    def __init__(
        self,
        handlers: dict[str, grpc.RpcMethodHandler],
        token: str | None,
        pool: CallPool,
        max_concurrent: int,
        stats: ServerStats,
        authorized: Callable[[str], None] | None = None,
        unauthenticated: Callable[[str], None] | None = None,
    ) -> None:
        self._token = token
        self._pool = pool
        self._max_concurrent = max_concurrent
        self.stats = stats
        self.refusals = futures.ThreadPoolExecutor(REFUSAL_THREADS, thread_name_prefix="policy_server_refusal")
        self._handlers = {name: _marking(handler, authorized) for name, handler in handlers.items()}
        self._unauthenticated = {
            problem: _refusal(
                grpc.StatusCode.UNAUTHENTICATED,
                f"{problem}; give the client this server's token",
                self.refusals,
                unauthenticated,
            )
            for problem in (NO_TOKEN, WRONG_TOKEN)
        }
        self._busy = _refusal(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the server is running its {max_concurrent} concurrent calls; retry shortly",
            self.refusals,
        )

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = self._handlers.get(handler_call_details.method)
        if handler is None:
            return None
        self.stats.count("calls")
        if self._token is not None:
            metadata: Sequence[tuple[str, str | bytes]] = handler_call_details.invocation_metadata or ()
            problem = token_problem(self._token, metadata)
            if problem:
                self.stats.count("refused_unauthenticated")
                return self._unauthenticated[problem]
        if self._pool.running >= self._max_concurrent:
            self.stats.count("refused_busy")
            return self._busy
        return handler

    def close(self) -> None:
        self.refusals.shutdown(wait=False, cancel_futures=True)


def _marking(handler: grpc.RpcMethodHandler, authorized: Callable[[str], None] | None) -> grpc.RpcMethodHandler:
    """`handler` (unary-unary) telling `authorized` the peer of each call it runs."""
    if authorized is None:
        return handler
    behavior = handler.unary_unary
    mark = authorized

    def run(request: Any, context: grpc.ServicerContext) -> Any:
        mark(context.peer())
        return behavior(request, context)

    return grpc.unary_unary_rpc_method_handler(run, handler.request_deserializer, handler.response_serializer)


def _refusal(
    code: grpc.StatusCode,
    message: str,
    pool: futures.ThreadPoolExecutor,
    tell: Callable[[str], None] | None = None,
) -> grpc.RpcMethodHandler:
    """A handler answering `code` at once on `pool`, without reading the request (stream-unary: nothing is read);
    `tell` is given the peer of each call it refuses."""

    def refuse(requests: Any, context: grpc.ServicerContext) -> bytes:
        if tell is not None:
            tell(context.peer())
        context.abort(code, message)
        raise AssertionError("unreachable")  # context.abort raises

    refuse.experimental_thread_pool = pool  # type: ignore[attr-defined]  # gRPC runs the handler there
    return grpc.stream_unary_rpc_method_handler(refuse)


def stats_fields(stats: ServerStats, limits: ServerLimits, request_bytes: int) -> dict[str, Any]:
    """The Stats reply's fields: the counts and the limits in force."""
    return {"counts": stats.snapshot(), "limits": {**asdict(limits), "max_request_bytes": request_bytes}}
