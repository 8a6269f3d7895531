"""What the server admits: limits on calls, request sizes and connections, and the counts of what it refused.

gRPC core enforces most limits before a request reaches Python: a message over `max_request_bytes` is refused
(RESOURCE_EXHAUSTED) before it is buffered, calls beyond `max_concurrent` are refused without queueing
(`maximum_concurrent_rpcs`; the worker pool has exactly that many threads, so an admitted call never waits for
one), connections beyond `max_connections` are closed, a connection that does not finish its handshake within
`handshake_timeout_s` or stays idle for `idle_timeout_s` is closed.

gRPC core also cancels calls (CANCELLED) that wait for the Python layer to take them once more than
``grpc.server.max_pending_requests`` (default 1000; up to 3000) are waiting: 10,000 concurrent calls on one
connection hit it. Here the pending limit is `max_connections` x `pending_per_connection`, so up to that many
calls at once are each answered: served, or refused RESOURCE_EXHAUSTED. (Limiting HTTP/2 streams per
connection instead made bursts meet REFUSED_STREAM, UNAVAILABLE at the client.)
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
from lerobot_policy_server.security import token_problem

# Header and task text allowed on top of a request's tensors.
REQUEST_OVERHEAD_BYTES = 1024 * 1024
COUNTS = ("calls", "refused_unauthenticated", "refused_busy", "refused_too_large", "malformed", "failed")


@dataclass(frozen=True)
class ServerLimits:
    """Limits of one server; `max_request_bytes` 0: the policy's inputs as raw tensors + `REQUEST_OVERHEAD_BYTES`."""

    max_concurrent: int = 8
    max_request_bytes: int = 0
    max_connections: int = 16
    pending_per_connection: int = 1000  # calls of one connection that may wait for a worker
    idle_timeout_s: float = 300.0
    max_connection_age_s: float = 0.0  # 0: no limit
    handshake_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_concurrent", "max_connections", "pending_per_connection"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("idle_timeout_s", "handshake_timeout_s"):
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

    def grpc_options(self, request_bytes: int) -> list[tuple[str, int]]:
        """The server's gRPC channel arguments."""
        pending = self.max_connections * self.pending_per_connection + 1
        options = [
            ("grpc.max_receive_message_length", request_bytes),
            ("grpc.max_send_message_length", protocol.MAX_MESSAGE_BYTES),
            ("grpc.max_allowed_incoming_connections", self.max_connections),
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
    """The server's worker pool; `running` counts the calls it holds (submitted, not finished), as gRPC does."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="policy_server")
        self._count_lock = threading.Lock()
        self.running = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        with self._count_lock:
            self.running += 1
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: futures.Future[Any]) -> None:
        with self._count_lock:
            self.running -= 1


class Gate(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Finds a call's handler, after the token check; counts the calls gRPC is about to refuse as busy.

    gRPC looks the handler up, then refuses the call when `max_concurrent` calls are running; the lookup runs in
    gRPC's polling thread, under the lock that check takes, so `pool.running` says whether it will. (A call that
    ends between the pool's count and gRPC's may be refused uncounted: the count is a lower bound.)
    """

    def __init__(
        self,
        handlers: dict[str, grpc.RpcMethodHandler],
        token: str | None,
        pool: CallPool,
        max_concurrent: int,
        stats: ServerStats,
    ) -> None:
        self._handlers = handlers
        self._token = token
        self._pool = pool
        self._max_concurrent = max_concurrent
        self.stats = stats

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = self._handlers.get(handler_call_details.method)
        if handler is None:
            return None
        self.stats.count("calls")
        if self._pool.running >= self._max_concurrent:
            self.stats.count("refused_busy")
            return handler  # gRPC answers RESOURCE_EXHAUSTED without running it
        if self._token is not None:
            metadata: Sequence[tuple[str, str | bytes]] = handler_call_details.invocation_metadata or ()
            problem = token_problem(self._token, metadata)
            if problem:
                self.stats.count("refused_unauthenticated")
                return _refusal(grpc.StatusCode.UNAUTHENTICATED, f"{problem}; give the client this server's token")
        return handler


def _refusal(code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler answering `code` at once, without reading the request (request streaming: nothing is read)."""

    def refuse(requests: Any, context: grpc.ServicerContext) -> bytes:
        context.abort(code, message)
        raise AssertionError("unreachable")  # context.abort raises

    return grpc.stream_unary_rpc_method_handler(refuse)


def stats_fields(stats: ServerStats, limits: ServerLimits, request_bytes: int) -> dict[str, Any]:
    """The Stats reply's fields: the counts and the limits in force."""
    return {"counts": stats.snapshot(), "limits": {**asdict(limits), "max_request_bytes": request_bytes}}
