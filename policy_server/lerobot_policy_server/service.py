"""The gRPC service around a loaded policy: generic handlers on raw frames (no generated code, no pickle).

Each method decodes its request with `protocol`, so a malformed or wrong-version frame is answered with a
typed status (INVALID_ARGUMENT / FAILED_PRECONDITION) and a one-line message instead of an exception trace.
Inferences run one at a time (one model); Info and Reset never wait behind a running inference's bytes.
Compressed camera images are decoded (bounded, `images`) before the inference lock is taken.
Who may call (`security`: token, TLS) and how much (`admission`: calls, request bytes, connections) is checked
before a method runs; `Stats` reports the counts of calls and refusals.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, Protocol

import grpc
import numpy as np
import numpy.typing as npt

from lerobot_policy_server import images, protocol
from lerobot_policy_server.admission import CallPool, Gate, ServerLimits, ServerStats, stats_fields
from lerobot_policy_server.front import ConnectionFront
from lerobot_policy_server.protocol import ErrorCode, PolicyInfo, PredictReply, ProtocolError
from lerobot_policy_server.security import SecurityError, ServerSecurity, is_loopback

# The client's channel options: frames carry camera images (a few MB), far above gRPC's 4 MB default. The
# server's are `ServerLimits.grpc_options` (requests sized from the policy's inputs).
MESSAGE_OPTIONS = [
    ("grpc.max_receive_message_length", protocol.MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", protocol.MAX_MESSAGE_BYTES),
]


class ObservationError(ValueError):
    """The observation does not fit the policy (answered INVALID_ARGUMENT)."""


class ServedPolicy(Protocol):
    """What the server serves: a backend of `backends`, or any object with these members."""

    info: PolicyInfo

    def predict(self, observation: Mapping[str, npt.NDArray[Any]], task: str) -> npt.NDArray[Any]:
        """(horizon, action_dim) actions in dataset units for one observation."""

    def reset(self) -> None:
        """Forget per-episode state (observation queues, action queues)."""


def one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class PolicyService:
    """Info / Predict / Reset / Stats on raw frames; `stats` counts calls and refusals."""

    def __init__(self, policy: ServedPolicy, limits: ServerLimits | None = None) -> None:
        self.policy = policy
        self.limits = limits or ServerLimits()
        self.request_bytes = self.limits.request_bytes(policy.info.inputs)
        self.stats = ServerStats()
        # Info says which image encodings this process decodes (JPEG / PNG need OpenCV).
        self._info_frame = protocol.encode_info(dataclasses.replace(policy.info, image_encodings=images.decodable()))
        self._lock = threading.Lock()
        self.predictions = 0

    @staticmethod
    def _abort(context: grpc.ServicerContext, code: ErrorCode, message: str) -> NoReturn:
        context.abort(grpc.StatusCode[code.value], one_line(message))
        raise AssertionError("unreachable")  # context.abort raises

    def _refuse_malformed(self, context: grpc.ServicerContext, err: ProtocolError) -> NoReturn:
        self.stats.count("refused_too_large" if err.code is ErrorCode.RESOURCE_EXHAUSTED else "malformed")
        self._abort(context, err.code, str(err))

    def info(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            protocol.decode_info_request(request)
        except ProtocolError as err:
            self._refuse_malformed(context, err)
        return self._info_frame

    def stats_reply(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            protocol.decode_stats_request(request)
        except ProtocolError as err:
            self._refuse_malformed(context, err)
        return protocol.encode_stats_reply(stats_fields(self.stats, self.limits, self.request_bytes))

    def reset(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            protocol.decode_reset_request(request)
        except ProtocolError as err:
            self._refuse_malformed(context, err)
        with self._lock:
            self.policy.reset()
        return protocol.encode_reset_reply()

    def predict(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            decoded = protocol.decode_predict_request(request)
            protocol.check_request_size(self.policy.info.inputs, decoded)
            observation = images.decode_images(self.policy.info.inputs, decoded.observation, decoded.images)
            protocol.check_observation(self.policy.info.inputs, observation)
        except ProtocolError as err:
            self._refuse_malformed(context, err)
        with self._lock:
            start = time.perf_counter()
            try:
                actions = np.asarray(self.policy.predict(observation, decoded.task))
            except ObservationError as err:
                self._abort(context, ErrorCode.INVALID_ARGUMENT, str(err))
            except Exception as err:  # a failing model is reported to the caller; the server keeps serving
                self.stats.count("failed")
                self._abort(context, ErrorCode.INTERNAL, f"inference failed: {type(err).__name__}: {err}")
            elapsed = time.perf_counter() - start
            self.predictions += 1
        reply = PredictReply(decoded.stamp_ns, decoded.task, actions, elapsed, self.policy.info.action_names)
        try:
            return protocol.encode_predict_reply(reply)
        except ProtocolError as err:
            self._abort(context, ErrorCode.INTERNAL, f"the policy's actions cannot be sent: {err}")

    def handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        """Handler of each method, by its full name (``/SERVICE/Method``)."""
        methods: dict[str, Callable[[bytes, grpc.ServicerContext], bytes]] = {
            "Info": self.info,
            "Predict": self.predict,
            "Reset": self.reset,
            "Stats": self.stats_reply,
        }
        return {f"/{protocol.SERVICE}/{name}": grpc.unary_unary_rpc_method_handler(fn) for name, fn in methods.items()}


def start_server(
    policy: ServedPolicy,
    host: str = "127.0.0.1",
    port: int = protocol.DEFAULT_PORT,
    security: ServerSecurity | None = None,
    limits: ServerLimits | None = None,
    front: bool | None = None,
) -> tuple[Any, int]:
    """Start serving `policy` on host:port (port 0 = any free port); returns (server, bound port).

    `security`: token and TLS callers must present (default: none; beyond loopback `SecurityError` unless it
    authenticates callers or says `insecure`); `limits`: `ServerLimits()` by default.
    `front` (default: when `host` is beyond loopback): clients connect to a `ConnectionFront` on host:port, which
    bounds connections per client address and in total, and relays them to gRPC on loopback. The server's
    `stop(grace)` stops both.
    """
    security = security or ServerSecurity()
    refusal = security.refusal(host)
    if refusal:
        raise SecurityError(refusal)
    service = PolicyService(policy, limits)
    fronted = not is_loopback(host) if front is None else front
    pool = CallPool(service.limits.max_concurrent)
    server = grpc.server(pool, options=service.limits.grpc_options(service.request_bytes, fronted))
    connection_front: ConnectionFront | None = None
    if fronted:
        connection_front = ConnectionFront(host, port, 0, service.limits, service.stats)
    gate = Gate(
        service.handlers(),
        security.token,
        pool,
        service.limits.max_concurrent,
        service.stats,
        connection_front.authorized if connection_front is not None else None,
        connection_front.unauthenticated if connection_front is not None else None,
    )
    server.add_generic_rpc_handlers((gate,))
    grpc_host, grpc_port = ("127.0.0.1", 0) if fronted else (host, port)
    address = f"[{grpc_host}]:{grpc_port}" if ":" in grpc_host else f"{grpc_host}:{grpc_port}"
    credentials = security.credentials()
    bound = server.add_insecure_port(address) if credentials is None else server.add_secure_port(address, credentials)
    if bound == 0:
        raise OSError(f"cannot listen on {address} (port in use or host not local)")
    server.start()
    if connection_front is None:
        return _Server(server, gate, None), bound
    connection_front.upstream_port = bound
    try:
        return _Server(server, gate, connection_front), connection_front.start()
    except OSError:
        server.stop(0)
        gate.close()
        raise


class _Server:
    """The gRPC server with its refusal threads and (beyond loopback) its front; `stop` stops them all."""

    def __init__(self, server: Any, gate: Gate, front: ConnectionFront | None) -> None:
        self.grpc_server, self.gate, self.front = server, gate, front

    def stop(self, grace: float | None) -> threading.Event:
        if self.front is not None:
            self.front.close()
        done: threading.Event = self.grpc_server.stop(grace)
        self.gate.close()
        return done

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return bool(self.grpc_server.wait_for_termination(timeout))


def serve_forever(server: Any, grace_s: float = 1.0) -> None:
    """Block until SIGINT/SIGTERM, then stop the server (running calls get `grace_s` to finish)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop(grace_s).wait()
