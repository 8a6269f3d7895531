"""The accepting front of a server beyond loopback: connections bounded per client address and in total.

gRPC core caps connections only in total (`grpc.max_allowed_incoming_connections`) and keeps a connection that
finished its HTTP/2 handshake until it is idle for `idle_timeout_s`: 20 connections that send the HTTP/2 preface
and nothing else held every place and locked the real client out. gRPC's Python server takes no accepted socket
(grpc/grpc#23760), so the front accepts the clients' TCP connections itself and relays each, byte for byte (TLS
included), to the gRPC server listening on loopback. It keeps:

* per client address at most `max_connections_per_peer`: beyond, a new connection is closed at once (before
  gRPC sees it). In all at most `max_connections`: beyond, a new connection takes the place of one that has
  not carried an authenticated call (`_victim`: one that has sent nothing first, then the address holding the
  most, then the oldest); when every one has, the new connection is closed. Authenticated
  connections are never closed to make room, so connections from many addresses that never call cannot crowd
  out the client that does.
* a connection that has carried no authenticated call `handshake_timeout_s` after it was accepted is closed.
* an address that failed more than `max_peer_failures` times within `peer_failure_window_s` (a call refused
  UNAUTHENTICATED, a connection closed for the handshake window or refused beyond its per-address limit) is
  banned for `ban_s`: its connections are closed and its new ones refused, so a flood of unauthenticated calls
  costs gRPC a few calls, not a parse and a refusal each, and a peer reconnecting as fast as it is refused stops.
  An address holding a connection that carried an authenticated call is never banned.

A refused connection is reset at accept, on the listening socket's own callback: no stream, task or gRPC
connection is made for it (a refused connection that cost a stream and a task each made 16 reconnecting silent
peers take ~0.3 s of the server's CPU per second). On Linux (IPv4) the listening socket also carries a socket
filter that drops the TCP packets of banned addresses in the kernel: their connection attempts get no answer and
wait out their own SYN retransmissions (196 reconnecting silent peers reset at accept still made ~5,000
connections a second, ~0.6 CPU-s/s between the server, the kernel and the attacker). The loopback connection to
gRPC is opened once the client has sent its first bytes, so silent connections cost gRPC nothing.

`authorized(peer)` and `unauthenticated(peer)` are called (by `admission.Gate`) with the gRPC peer string of the
front's loopback connection, which names the connection it relays. Counts go to the server's `ServerStats`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TypeVar

from lerobot_policy_server.admission import ServerLimits, ServerStats

LOOPBACK = "127.0.0.1"
_CHUNK = 256 * 1024
_BACKLOG = 1024
_ACCEPTS_PER_WAKE = 256  # connections taken from the listening socket before the loop serves the others
_ACCEPT_PAUSE_S = 0.2  # out of file descriptors: accept again after this
_MAX_TRACKED_ADDRESSES = 4096  # addresses with failures or bans remembered at once (the oldest are forgotten)
_T = TypeVar("_T")
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST and frees the socket at once
_SO_ATTACH_FILTER = getattr(socket, "SO_ATTACH_FILTER", 26)
_SO_DETACH_FILTER = getattr(socket, "SO_DETACH_FILTER", 27)
_MAX_FILTERED = 250  # banned addresses in the socket filter (a jump reaches at most 255 instructions)


def _reset(sock: socket.socket) -> None:
    """Close `sock` with a reset: no FIN handshake, no TIME_WAIT, and a peer writing to it learns at once."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    sock.close()


@dataclass(eq=False)
class _Connection:
    peer: str
    accepted: float
    sock: socket.socket
    client: asyncio.StreamWriter | None = None
    upstream: asyncio.StreamWriter | None = None
    authorized: bool = False
    spoke: bool = False  # the client has sent bytes
    streaming: bool = False  # asyncio holds `sock` (its transport is being made): only the transport may close it
    closed: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        """Drop both sides at once (no lingering half-closed relay)."""
        if self.closed:
            return
        self.closed = True
        if not self.streaming:
            _reset(self.sock)  # (closed under a transport, its number could be reused and read by the old one)
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
        self._failures: dict[str, collections.deque[float]] = {}  # address -> times of its recent failures
        self._banned: dict[str, float] = {}  # address -> monotonic time its ban ends
        self._loop = asyncio.new_event_loop()
        self._listener: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="policy_server_front", daemon=True)

    def start(self) -> int:
        """Listen; OSError when (host, port) cannot be bound. Returns the bound port."""
        try:
            self._listener = _listen(self.host, self.port)
        except OSError as err:
            raise OSError(f"cannot listen on {self.host} port {self.port}: {err}") from None
        self._thread.start()
        return int(self._listener.getsockname()[1])

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        assert self._listener is not None
        self._loop.add_reader(self._listener, self._accept)
        try:
            self._loop.run_forever()
            self._loop.remove_reader(self._listener)
            self._listener.close()
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
            if self._listener is not None:
                self._listener.close()
            if not self._thread.ident:  # never started: its loop never ran
                self._loop.close()
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)

    def authorized(self, peer: str) -> None:
        """The connection whose loopback side gRPC names `peer` (``ipv4:127.0.0.1:PORT``) carried an admitted call."""
        connection = self._relayed(peer)
        if connection is not None:
            connection.authorized = True  # one attribute: set from gRPC's threads, read on the loop

    def unauthenticated(self, peer: str) -> None:
        """The connection gRPC names `peer` carried a call refused UNAUTHENTICATED (called from gRPC's threads)."""
        connection = self._relayed(peer)
        if connection is not None:
            with contextlib.suppress(RuntimeError):  # the loop has stopped
                self._loop.call_soon_threadsafe(self._failed, connection.peer)

    def counts(self) -> dict[str, int]:
        """Connections held now, and of them authenticated; addresses banned now."""
        held = [c for c in self._connections if not c.closed]
        now = time.monotonic()
        banned = sum(until > now for until in list(self._banned.values()))
        return {"held": len(held), "authenticated": sum(c.authorized for c in held), "banned": banned}

    def _relayed(self, peer: str) -> _Connection | None:
        head, _, port = peer.rpartition(":")
        if head and port.isdigit():
            return self._by_upstream_port.get(int(port))
        return None

    def _accept(self) -> None:
        """Take what the listening socket holds: refuse (reset) or hold each connection; never blocks."""
        assert self._listener is not None
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of file descriptors or buffers: the backlog waits, the loop serves the others
                self._loop.remove_reader(self._listener)
                self._loop.call_later(_ACCEPT_PAUSE_S, self._loop.add_reader, self._listener, self._accept)
                return
            peer = str(address[0])
            if not self._make_room(peer):
                self.stats.count("refused_connections")
                self._failed(peer)  # before the reset: the peer's next connection meets the ban
                _reset(sock)
                continue
            sock.setblocking(False)
            connection = _Connection(peer, time.monotonic(), sock, spoke=_has_bytes(sock))
            self._connections.append(connection)
            self.stats.count("connections")
            connection.tasks.append(self._loop.create_task(self._serve(connection)))

    def _make_room(self, peer: str) -> bool:
        """Whether a new connection from `peer` may be held, closing an unauthenticated one where a limit is met."""
        until = self._banned.get(peer)
        if until is not None:
            if time.monotonic() < until:
                return False
            del self._banned[peer]
        if sum(c.peer == peer for c in self._connections) >= self.limits.max_connections_per_peer:
            return False  # refused at once: cheaper than any connection the peer churns through
        if len(self._connections) < self.limits.max_connections:
            return True
        victim = self._victim()
        if victim is None:
            return False
        self.stats.count("evicted_connections")
        self._forget(victim)
        return True

    def _victim(self) -> _Connection | None:
        """The connection that gives way to a new one: never an authenticated one; first one that has sent
        nothing, then one of the address holding the most, then the oldest. A client that has just connected
        and sent its call is not pushed out by a flood of silent connections from many addresses (round 4:
        10,000 of them), nor by one address's."""
        held = collections.Counter(c.peer for c in self._connections)
        candidates = [c for c in self._connections if not c.authorized]
        if not candidates:
            return None
        return max(candidates, key=lambda c: (not c.spoke, held[c.peer]))  # the first of equals: the oldest

    def _forget(self, connection: _Connection) -> None:
        connection.close()
        with contextlib.suppress(ValueError):
            self._connections.remove(connection)

    def _failed(self, peer: str) -> None:
        """`peer` failed once (an unauthenticated call, a handshake window run out, a connection beyond its
        limit); ban it when that makes more than `max_peer_failures` within `peer_failure_window_s` and it holds
        no authenticated connection (the calls before are answered UNAUTHENTICATED: a client with a wrong token
        is told so)."""
        now = time.monotonic()
        if self._banned.get(peer, 0.0) > now:
            return
        failures = self._failures.pop(peer, None) or collections.deque()
        self._failures[peer] = failures  # most recent last, so the oldest address is forgotten first
        failures.append(now)
        while failures and failures[0] < now - self.limits.peer_failure_window_s:
            failures.popleft()
        _forget_oldest(self._failures)
        if len(failures) <= self.limits.max_peer_failures:
            return
        if any(c.authorized for c in self._connections if c.peer == peer):
            return
        del self._failures[peer]
        until = now + self.limits.ban_s
        self._banned.pop(peer, None)
        self._banned[peer] = until
        _forget_oldest(self._banned)
        self.stats.count("banned_peers")
        for held in [c for c in self._connections if c.peer == peer]:
            self._forget(held)
        self._filter()
        self._loop.call_later(self.limits.ban_s, self._unban, peer, until)

    def _unban(self, peer: str, until: float) -> None:
        if self._banned.get(peer) == until:
            del self._banned[peer]
            self._filter()

    def _filter(self) -> None:
        """Drop the packets of the addresses banned now in the kernel (Linux, IPv4); elsewhere they are reset at
        accept."""
        if self._listener is None or self._listener.family != socket.AF_INET or not sys.platform.startswith("linux"):
            return
        banned = [p for p in self._banned if _ipv4(p)][-_MAX_FILTERED:]
        with contextlib.suppress(OSError):  # not permitted here: the bans still hold at accept
            _attach_drop_filter(self._listener, banned)

    async def _serve(self, connection: _Connection) -> None:
        timer = self._loop.call_later(self.limits.handshake_timeout_s, self._check_handshake, connection)
        upstream_port = None
        try:
            if connection.closed:  # evicted before this task ran
                return
            connection.streaming = True
            reader, writer = await asyncio.open_connection(sock=connection.sock, limit=_CHUNK)
            connection.client = writer
            if connection.closed:  # evicted meanwhile
                writer.transport.abort()
                return
            first = await reader.read(_CHUNK)  # a connection that sends nothing costs gRPC nothing
            if not first or connection.closed:
                return
            connection.spoke = True
            up_reader, up_writer = await asyncio.open_connection(LOOPBACK, self.upstream_port)
            up_writer.write(first)
            connection.upstream = up_writer
            upstream_port = int(up_writer.get_extra_info("sockname")[1])
            self._by_upstream_port[upstream_port] = connection
            if connection.closed:  # evicted while connecting
                up_writer.transport.abort()
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
            self._failed(connection.peer)


def _listen(host: str, port: int) -> socket.socket:
    """A non-blocking listening TCP socket on (host, port)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _has_bytes(sock: socket.socket) -> bool:
    """Whether the client has sent something already (a gRPC client sends its preface and call at once)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:  # nothing yet (BlockingIOError), or reset
        return False


def _ipv4(address: str) -> bool:
    try:
        socket.inet_aton(address)
    except OSError:
        return False
    return address.count(".") == 3


def _attach_drop_filter(sock: socket.socket, addresses: list[str]) -> None:
    """Give `sock` (a listening IPv4 TCP socket) a classic BPF filter dropping packets from `addresses`.

    Connections accepted since inherit the filter of their time, which drops only addresses banned then."""
    if not addresses:
        sock.setsockopt(socket.SOL_SOCKET, _SO_DETACH_FILTER, 0)
        return
    load_source = (0x20, 0, 0, (1 << 32) - 0x100000 + 12)  # ld [SKF_NET_OFF + 12]: the IPv4 source address
    program = [load_source]
    for index, address in enumerate(addresses):  # jeq address: to the drop below, else on
        program.append((0x15, len(addresses) - index, 0, int.from_bytes(socket.inet_aton(address), "big")))
    program += [(0x06, 0, 0, 0xFFFFFFFF), (0x06, 0, 0, 0)]  # ret: the whole packet; ret 0: drop
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(code)
    sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, struct.pack("HP", len(program), ctypes.addressof(buffer)))


def _forget_oldest(table: dict[str, _T]) -> None:
    while len(table) > _MAX_TRACKED_ADDRESSES:
        del table[next(iter(table))]


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
