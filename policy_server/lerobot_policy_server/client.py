"""A client of the policy server: typed calls with per-call timeouts; failures are `RemoteError`s.

`grpc://host:port` addresses are parsed by `parse_address`. The channel reconnects by itself with a short
capped backoff (`RECONNECT_OPTIONS`); calls never wait for a connection (fail fast with UNAVAILABLE), so the
caller decides when to try again.

Camera images ((H, W, 3) uint8 values) go raw, or as JPEG / PNG (`image_encoding`, `jpeg_quality`), which the
server decodes; `predict_timed` also says how many bytes a request took and how long the round trip was.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc
import numpy.typing as npt

from lerobot_policy_server import images, protocol
from lerobot_policy_server.protocol import ErrorCode, PolicyInfo, PredictReply, PredictRequest, ProtocolError
from lerobot_policy_server.security import ClientSecurity, token_metadata
from lerobot_policy_server.service import MESSAGE_OPTIONS, one_line

SCHEME = "grpc://"
RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def connect_options(timeout_s: float) -> list[tuple[str, int]]:
    """RECONNECT_OPTIONS plus the shortest time a connection attempt is given: the call timeout.

    gRPC core reads `grpc.min_reconnect_backoff_ms` as that minimum connect timeout (TCP + HTTP/2 handshakes);
    at 100 ms every server more than ~50 ms of round trip away was unreachable (tests/multihost).
    """
    return [*RECONNECT_OPTIONS, ("grpc.min_reconnect_backoff_ms", max(1, round(timeout_s * 1000)))]


class RemoteError(Exception):
    """A call failed: `code` says why (an `ErrorCode`), the message is one line."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_address(url: str) -> tuple[str, int]:
    """``grpc://host:port`` -> (host, port); ValueError naming what is wrong."""
    if not url.startswith(SCHEME):
        raise ValueError(f"{url!r} is not a policy server address; expected grpc://HOST:PORT")
    rest = url[len(SCHEME) :].rstrip("/")
    host, sep, port_text = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{url!r}: expected grpc://HOST:PORT with a port in 1..65535")
    return host, int(port_text)


@dataclass(frozen=True)
class Transfer:
    """What one Predict call cost: request and reply sizes, the time spent compressing the images, and the round
    trip (send to reply, compression not included)."""

    request_bytes: int
    reply_bytes: int
    encode_s: float
    round_trip_s: float


class PolicyClient:
    """Info / Predict / Reset against one server; every call has its own timeout (seconds).

    `image_encoding` (raw, jpeg or png; `jpeg_quality` 1..100) is how Predict sends camera images.
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = 5.0,
        image_encoding: str = protocol.RAW,
        jpeg_quality: int = images.DEFAULT_JPEG_QUALITY,
        security: ClientSecurity | None = None,
    ) -> None:
        """`security`: the token and TLS files the server asks for (SecurityError, a ValueError, when unusable)."""
        host, port = parse_address(url)
        if not timeout_s > 0:
            raise ValueError(f"timeout must be > 0 s, got {timeout_s}")
        images.check_encoding(image_encoding, jpeg_quality)
        self.url = url
        self.timeout_s = timeout_s
        self.image_encoding = image_encoding
        self.jpeg_quality = int(jpeg_quality)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        security = security or ClientSecurity()
        options = [*MESSAGE_OPTIONS, *connect_options(timeout_s)]
        credentials = security.credentials()
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._metadata = token_metadata(security.token) if security.token else None
        self._calls = {name: self._channel.unary_unary(f"/{protocol.SERVICE}/{name}") for name in protocol.METHODS}

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, frame: bytes, timeout_s: float | None) -> bytes:
        try:
            reply: bytes = self._calls[method](
                frame, timeout=timeout_s or self.timeout_s, wait_for_ready=False, metadata=self._metadata
            )
        except grpc.RpcError as err:
            status: Any = err
            code_name = status.code().name if status.code() is not None else "UNKNOWN"
            code = ErrorCode(code_name) if code_name in ErrorCode.__members__ else ErrorCode.UNKNOWN
            details = one_line(status.details() or code_name)
            if code is ErrorCode.UNAVAILABLE:
                details = f"policy server {self.url} unreachable: {details}"
            elif code is ErrorCode.DEADLINE_EXCEEDED:
                details = f"policy server {self.url} did not answer {method} within {timeout_s or self.timeout_s:g} s"
            elif code in (ErrorCode.UNAUTHENTICATED, ErrorCode.RESOURCE_EXHAUSTED):
                details = f"policy server {self.url} refused {method}: {details}"
            raise RemoteError(code, details) from None
        return reply

    def _decode(self, decode: Any, data: bytes) -> Any:
        try:
            return decode(data)
        except ProtocolError as err:
            raise RemoteError(err.code, f"policy server {self.url} sent a bad reply: {err}") from None

    def info(self, timeout_s: float | None = None) -> PolicyInfo:
        info: PolicyInfo = self._decode(
            protocol.decode_info, self._call("Info", protocol.encode_info_request(), timeout_s)
        )
        return info

    def stats(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The server's counts of calls and refusals, and its limits (the Stats reply)."""
        stats: dict[str, Any] = self._decode(
            protocol.decode_stats_reply, self._call("Stats", protocol.encode_stats_request(), timeout_s)
        )
        return stats

    def reset(self, timeout_s: float | None = None) -> None:
        self._decode(protocol.decode_reset_reply, self._call("Reset", protocol.encode_reset_request(), timeout_s))

    def predict(
        self,
        observation: Mapping[str, npt.NDArray[Any]],
        stamp_ns: int,
        task: str = "",
        timeout_s: float | None = None,
    ) -> PredictReply:
        return self.predict_timed(observation, stamp_ns, task, timeout_s)[0]

    def predict_timed(
        self,
        observation: Mapping[str, npt.NDArray[Any]],
        stamp_ns: int,
        task: str = "",
        timeout_s: float | None = None,
    ) -> tuple[PredictReply, Transfer]:
        """`predict`, and what the call cost on the wire (`Transfer`)."""
        start = time.perf_counter()
        arrays, encoded = images.compress_observation(observation, self.image_encoding, self.jpeg_quality)
        frame = protocol.encode_predict_request(PredictRequest(int(stamp_ns), task, arrays, encoded))
        sent = time.perf_counter()
        data = self._call("Predict", frame, timeout_s)
        transfer = Transfer(len(frame), len(data), sent - start, time.perf_counter() - sent)
        reply: PredictReply = self._decode(protocol.decode_predict_reply, data)
        if reply.stamp_ns != int(stamp_ns) or reply.task != task:
            raise RemoteError(
                ErrorCode.INTERNAL,
                f"policy server {self.url} answered for stamp {reply.stamp_ns} / task {reply.task!r}, "
                f"asked for {stamp_ns} / {task!r}",
            )
        return reply, transfer
