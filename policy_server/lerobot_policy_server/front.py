"""The accepting front of a server beyond loopback: connections bounded per client address and in total.

gRPC core caps connections only in total (`grpc.max_allowed_incoming_connections`) and keeps a connection that
finished its HTTP/2 handshake until it is idle for `idle_timeout_s`: 20 connections that send the HTTP/2 preface
and nothing else held every place and locked the real client out. gRPC's Python server takes no accepted socket
(grpc/grpc#23760), so the front accepts the clients' TCP connections itself and relays each, byte for byte (TLS
included), to the gRPC server listening on loopback. It keeps:

* per client address at most `max_connections_per_peer`: beyond, a new connection is closed at once (before
  gRPC sees it). In all at most `max_connections`: beyond, a new connection takes the place of the oldest one
  that has not carried an authenticated call; when every one has, the new connection is closed. Authenticated
  connections are never closed to make room, so connections from many addresses that never call cannot crowd
  out the client that does.
* a connection that has carried no authenticated call `handshake_timeout_s` after it was accepted is closed.

The loopback connection to gRPC is opened once the client has sent its first bytes, so silent connections cost
gRPC nothing.

`authorized(peer)` is called (by `admission.Gate`, on every admitted call) with the gRPC peer string of the
front's loopback connection, which names the connection it relays. Counts go to the server's `ServerStats`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field

from lerobot_policy_server.admission import ServerLimits, ServerStats

LOOPBACK = "127.0.0.1"
_CHUNK = 256 * 1024


@dataclass(eq=False)
class _Connection:
    peer: str
    accepted: float
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    authorized: bool = False
    closed: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        """Drop both sides at once (no lingering half-closed relay)."""
        if self.closed:
            return
        self.closed = True
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class ConnectionFront:
    """Listens on (host, port) and relays each admitted connection to the gRPC server on LOOPBACK:`upstream_port`.

    The event loop runs in its own thread; `start()` returns the bound port, `close()` stops it.
    """

    def __init__(self, host: str, port: int, upstream_port: int, limits: ServerLimits, stats: ServerStats) -> None:
        self.host, self.port, self.upstream_port = host, port, upstream_port
        self.limits, self.stats = limits, stats
        self._connections: list[_Connection] = []  # oldest first
        self._by_upstream_port: dict[int, _Connection] = {}
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="policy_server_front", daemon=True)

    def start(self) -> int:
        """Listen; OSError when (host, port) cannot be bound. Returns the bound port."""
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise OSError(f"cannot listen on {self.host} port {self.port}: {self._error}")
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, self.host, self.port, reuse_address=True, backlog=1024)
            )
        except OSError as err:
            self._error = err
            self._started.set()
            return
        self._started.set()
        try:
            self._loop.run_forever()
            for connection in list(self._connections):
                connection.close()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self._loop.close()

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        def stop() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(timeout=5.0)

    def authorized(self, peer: str) -> None:
        """The connection whose loopback side gRPC names `peer` (``ipv4:127.0.0.1:PORT``) carried an admitted call."""
        head, _, port = peer.rpartition(":")
        if head and port.isdigit():
            connection = self._by_upstream_port.get(int(port))
            if connection is not None:
                connection.authorized = True  # one attribute: set from gRPC's threads, read on the loop

    def counts(self) -> dict[str, int]:
        """Connections held now, and of them authenticated."""
        held = [c for c in self._connections if not c.closed]
        return {"held": len(held), "authenticated": sum(c.authorized for c in held)}

    def _make_room(self, peer: str) -> bool:
        """Whether a new connection from `peer` may be held, closing an unauthenticated one where a limit is met."""
        if sum(c.peer == peer for c in self._connections) >= self.limits.max_connections_per_peer:
            return False  # refused at once: cheaper than any connection the peer churns through
        if len(self._connections) < self.limits.max_connections:
            return True
        oldest = next((c for c in self._connections if not c.authorized), None)
        if oldest is None:
            return False
        self.stats.count("evicted_connections")
        self._forget(oldest)
        return True

    def _forget(self, connection: _Connection) -> None:
        connection.close()
        with contextlib.suppress(ValueError):
            self._connections.remove(connection)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = str(peername[0]) if peername else "?"
        if not self._make_room(peer):
            self.stats.count("refused_connections")
            writer.transport.abort()
            return
        connection = _Connection(peer, time.monotonic(), writer)
        self._connections.append(connection)
        self.stats.count("connections")
        timer = self._loop.call_later(self.limits.handshake_timeout_s, self._check_handshake, connection)
        upstream_port = None
        try:
            first = await reader.read(_CHUNK)  # a connection that sends nothing costs gRPC nothing
            if not first or connection.closed:
                return
            up_reader, up_writer = await asyncio.open_connection(LOOPBACK, self.upstream_port)
            up_writer.write(first)
            connection.upstream = up_writer
            upstream_port = int(up_writer.get_extra_info("sockname")[1])
            self._by_upstream_port[upstream_port] = connection
            if connection.closed:  # evicted while connecting
                return
            await asyncio.gather(_relay(reader, up_writer), _relay(up_reader, writer), return_exceptions=True)
        except OSError:
            pass
        finally:
            timer.cancel()
            self._forget(connection)
            if upstream_port is not None:
                self._by_upstream_port.pop(upstream_port, None)

    def _check_handshake(self, connection: _Connection) -> None:
        if not connection.authorized and not connection.closed:
            self.stats.count("closed_before_a_call")
            self._forget(connection)


async def _relay(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until `source` ends, then end `sink`'s side (half-close) or, when it cannot, drop it."""
    try:
        while chunk := await source.read(_CHUNK):
            sink.write(chunk)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except OSError:
        sink.transport.abort()
