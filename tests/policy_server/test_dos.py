"""The policy server under denial of service, on loopback (quick): callers without the token take no worker,
connections that make no authenticated call cannot crowd out a client that does, weak setups are refused.

The same attacks from another host, with the authorized client's latency, are tests/multihost/test_policy_server_dos.py;
the counts at scale are the `policy_server_dos` rows of the reliability suite.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_policy_server import SinePolicy
from test_security import STATE, BlockingPolicy

from lerobot_policy_server import protocol
from lerobot_policy_server.admission import ServerLimits
from lerobot_policy_server.client import PolicyClient
from lerobot_policy_server.protocol import PredictRequest
from lerobot_policy_server.security import (
    ClientSecurity,
    SecurityError,
    ServerSecurity,
    token_metadata,
)
from lerobot_policy_server.service import start_server

TOKEN = "dos-test-token-0123456789"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")  # preface + empty SETTINGS


def test_a_caller_without_the_token_is_refused_without_taking_a_worker() -> None:
    """Round 4: the busy check came first, so callers without the token took the call slots (and were told
    RESOURCE_EXHAUSTED while the one slot ran an authorized call)."""
    policy = BlockingPolicy()
    server, port = start_server(policy, "127.0.0.1", 0, ServerSecurity(TOKEN), ServerLimits(max_concurrent=1))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        predict = channel.unary_unary(f"/{protocol.SERVICE}/Predict")
        info = channel.unary_unary(f"/{protocol.SERVICE}/Info")
        request = protocol.encode_predict_request(PredictRequest(0, "", STATE))
        running = predict.future(request, timeout=60, metadata=token_metadata(TOKEN))
        assert policy.entered.wait(60)
        for _ in range(20):  # the only worker is busy: refused for the token, not for the worker
            with pytest.raises(grpc.RpcError) as err:
                info(protocol.encode_info_request(), timeout=10)
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
        policy.release.set()
        assert len(running.result()) > 0
        stats = channel.unary_unary(f"/{protocol.SERVICE}/Stats")
        reply = protocol.decode_stats_reply(
            stats(protocol.encode_stats_request(), timeout=10, metadata=token_metadata(TOKEN))
        )
        assert reply["counts"]["refused_unauthenticated"] == 20
        assert reply["counts"]["refused_busy"] == 0
    finally:
        channel.close()
        server.stop(0)


def test_a_short_token_is_refused_with_one_line() -> None:
    with pytest.raises(SecurityError, match=r"1 characters, fewer than the 16.*openssl rand"):
        ServerSecurity(token="x")
    assert ServerSecurity(token="x" * 16).authenticates


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lerobot_policy_server", str(tmp_path), "--port", "0", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_cli_refuses_a_short_token_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("x\n")
    result = cli(tmp_path, "--host", "0.0.0.0", "--token-file", str(tmp_path / "token"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "fewer than the 16" in result.stderr, result.stderr


def test_tls_without_authentication_is_not_enough_beyond_loopback(tmp_path: Path) -> None:
    """Round 4: TLS alone (no token, no client certificates) passed the guard; it encrypts but lets anyone in."""
    (tmp_path / "cert.pem").write_text("unused")
    (tmp_path / "key.pem").write_text("unused")
    result = cli(tmp_path, "--host", "0.0.0.0", "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key",
                 str(tmp_path / "key.pem"))  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "without authentication (TLS encrypts, but lets in any client)" in result.stderr
    assert "--tls-client-ca" in result.stderr and "--token-file" in result.stderr


def test_the_insecure_banner_says_what_is_missing() -> None:
    """Round 4: with --insecure and no token the banner spoke of "the token" travelling in clear text."""
    assert "no token and no client certificates" in ServerSecurity().missing()
    assert "clear text" in ServerSecurity().missing()
    assert ServerSecurity(token=TOKEN).missing() == "no TLS: the token crosses the network in clear text"
    assert "the token" not in ServerSecurity(tls_cert="c", tls_key="k").missing()


@pytest.fixture
def fronted():
    """A server with a token behind its connection front, on loopback (every client here is one peer)."""
    started = []

    def start(limits: ServerLimits) -> int:
        server, port = start_server(SinePolicy(6, 15, 30.0, "none"), "127.0.0.1", 0, ServerSecurity(TOKEN), limits,
                                    front=True)  # fmt: skip
        started.append(server)
        return port

    yield start
    for server in started:
        server.stop(0)


def authorized_calls(port: int, count: int) -> dict[str, int]:
    with PolicyClient(f"grpc://127.0.0.1:{port}", 5.0, security=ClientSecurity(token=TOKEN)) as client:
        for _ in range(count):
            assert client.predict(STATE, stamp_ns=1).actions.shape == (15, 6)
        counts: dict[str, int] = client.stats()["counts"]
        return counts


def test_preface_only_connections_do_not_lock_out_the_authorized_client(fronted) -> None:
    """Round 4: 20 connections that sent only the HTTP/2 preface held the 16 places until the idle timeout."""
    port = fronted(ServerLimits(max_connections=16, max_connections_per_peer=64, handshake_timeout_s=600))
    held = []
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(PREFACE)
            held.append(sock)
        counts = authorized_calls(port, 5)
        # Another client's connection: that place was taken from the oldest unauthenticated connection.
        counts = authorized_calls(port, 5)
    finally:
        for sock in held:
            sock.close()
    assert counts["evicted_connections"] >= 20 - 16  # beyond 16 in all, the oldest unauthenticated one goes


def test_a_connection_with_no_authenticated_call_is_closed_after_the_handshake_window(fronted) -> None:
    port = fronted(ServerLimits(handshake_timeout_s=0.5))
    with socket.create_connection(("127.0.0.1", port)) as silent, socket.create_connection(("127.0.0.1", port)) as pre:
        pre.sendall(PREFACE)
        for sock in (silent, pre):
            sock.settimeout(30)
            start = time.monotonic()
            while sock.recv(4096):  # the server's SETTINGS for the preface, then the end
                pass
            assert time.monotonic() - start < 30
        counts = authorized_calls(port, 1)
    assert counts["closed_before_a_call"] == 2


def test_an_authenticated_connection_is_kept_when_the_places_are_full(fronted) -> None:
    port = fronted(ServerLimits(max_connections=2, max_connections_per_peer=10, handshake_timeout_s=600))
    with PolicyClient(f"grpc://127.0.0.1:{port}", 5.0, security=ClientSecurity(token=TOKEN)) as client:
        client.info()
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        try:
            assert client.predict(STATE, stamp_ns=1).actions.shape == (15, 6)  # same connection, still open
            counts = client.stats()["counts"]
        finally:
            for sock in socks:
                sock.close()
    assert counts["refused_connections"] == 0
    assert counts["evicted_connections"] == 4  # each newcomer took the place of the previous unauthenticated one


def refused(port: int) -> type[OSError] | None:
    """How a new connection to the front is refused: reset at accept, or (Linux) never answered (TimeoutError:
    the banned address's SYN dropped by the listening socket's filter); None when it is held."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(30)
            sock.sendall(PREFACE)
            sock.recv(4096)
    except (ConnectionResetError, TimeoutError) as err:  # the reset on connect already, or on send or receive
        return type(err)
    return None


def unauthenticated_calls(port: int, count: int) -> dict[str, int]:
    """Up to `count` calls without the token, one after the other, until one is answered otherwise; their codes."""
    codes: dict[str, int] = {}
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        info = channel.unary_unary(f"/{protocol.SERVICE}/Info")
        for _ in range(count):
            with pytest.raises(grpc.RpcError) as err:
                info(protocol.encode_info_request(), timeout=3)
            code = err.value.code().name
            codes[code] = codes.get(code, 0) + 1
            if code != "UNAUTHENTICATED":
                break
    return codes


def test_an_address_flooding_unauthenticated_calls_is_banned() -> None:
    """Round 4: 8 callers without the token had every call parsed and refused by gRPC (9,078 in 4 s, ~0.7 s of the
    server's CPU a second): past `max_peer_failures` the address's connections are refused before gRPC sees them."""
    limits = ServerLimits(max_peer_failures=3, ban_s=2.0)
    server, port = start_server(SinePolicy(6, 15, 30.0, "none"), "127.0.0.1", 0, ServerSecurity(TOKEN), limits,
                                front=True)  # fmt: skip
    try:
        codes = unauthenticated_calls(port, 10)
        # The first 3 are told why; the one that bans the address may be too, or see its connection closed.
        assert limits.max_peer_failures <= codes["UNAUTHENTICATED"] <= limits.max_peer_failures + 1, codes
        assert sum(codes.values()) < 10, codes  # then a call fails: its connection is refused
        assert refused(port) is (TimeoutError if sys.platform.startswith("linux") else ConnectionResetError)
        counts = server.gate.stats.snapshot()
        assert counts["banned_peers"] == 1 and counts["refused_unauthenticated"] <= 4, counts
        time.sleep(limits.ban_s)  # the ban ends: the address is served again
        assert authorized_calls(port, 1)["banned_peers"] == 1
    finally:
        server.stop(0)


def test_a_peer_reconnecting_beyond_its_limit_is_banned() -> None:
    """Silent connections beyond the per-address limit were reset and reopened at once (~4,000 a second)."""
    limits = ServerLimits(max_connections_per_peer=2, max_peer_failures=3, handshake_timeout_s=600, ban_s=600.0)
    server, port = start_server(SinePolicy(6, 15, 30.0, "none"), "127.0.0.1", 0, ServerSecurity(TOKEN), limits,
                                front=True)  # fmt: skip
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
        outcomes = [refused(port) for _ in range(5)]
        assert outcomes[:4] == [ConnectionResetError] * 4, outcomes  # 4 > 3 failures: banned
        if sys.platform.startswith("linux"):
            assert outcomes[4] is TimeoutError, outcomes
        for sock in held:  # the banned address's connections are closed
            sock.settimeout(30)
            assert sock.recv(4096) == b""
        counts = server.gate.stats.snapshot()
        assert counts["banned_peers"] == 1 and counts["refused_connections"] >= 4, counts
    finally:
        for sock in held:
            sock.close()
        server.stop(0)


def test_an_address_holding_an_authenticated_connection_is_not_banned() -> None:
    limits = ServerLimits(max_peer_failures=3, ban_s=600.0)
    server, port = start_server(SinePolicy(6, 15, 30.0, "none"), "127.0.0.1", 0, ServerSecurity(TOKEN), limits,
                                front=True)  # fmt: skip
    try:
        with PolicyClient(f"grpc://127.0.0.1:{port}", 5.0, security=ClientSecurity(token=TOKEN)) as client:
            client.info()
            assert unauthenticated_calls(port, 10) == {"UNAUTHENTICATED": 10}
            assert client.predict(STATE, stamp_ns=1).actions.shape == (15, 6)
            counts = client.stats()["counts"]
        assert counts["banned_peers"] == 0 and counts["refused_unauthenticated"] == 10, counts
    finally:
        server.stop(0)


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_the_python_api_refuses_tls_without_authentication_beyond_loopback(host: str) -> None:
    """Round 4's TLS-only refusal was in the CLI alone: `start_server` took TLS without a token on 0.0.0.0."""
    for security in (ServerSecurity(tls_cert="cert.pem", tls_key="key.pem"), ServerSecurity()):
        with pytest.raises(SecurityError, match=r"^refusing to listen on .* without authentication.*--insecure") as err:
            start_server(SinePolicy(6, 15, 30.0, "none"), host, 0, security)
        assert "\n" not in str(err.value)
    assert "TLS encrypts, but lets in any client" in ServerSecurity(tls_cert="c", tls_key="k").refusal(host)
    assert ServerSecurity(token=TOKEN).refusal(host) == ServerSecurity(insecure=True).refusal(host) == ""
    assert ServerSecurity(tls_cert="c", tls_key="k").refusal("127.0.0.1") == ""


def idle_connection_count() -> int:
    """How many idle connections this process may open beside what it holds: up to 10,000 (hostile round 4),
    fewer where the file descriptor limit is lower."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(0, min(10_000, soft // 2 - 256))


@pytest.mark.skipif(idle_connection_count() < 1000, reason="needs a file descriptor limit of 2,512 or more")
def test_thousands_of_idle_connections_from_many_addresses_do_not_lock_out_the_client(tmp_path: Path) -> None:
    """Round 4: 10,000 idle TCP connections held the server's places, and its file descriptors, while they stayed
    open. Here they come from 2,500 loopback addresses (4 each, within the per-address limit) and stay open on
    this side; the server, in a process of its own, must serve the client on 127.0.0.1 meanwhile and hold no more
    than its `max_connections`."""
    (tmp_path / "token").write_text(TOKEN)
    script = Path(__file__).resolve().parent / "fake_policy_server.py"
    server = subprocess.Popen([sys.executable, str(script), "--front", "--token-file", str(tmp_path / "token")],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    idle: list[socket.socket] = []
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[-1])
        fds_before = len(os.listdir(f"/proc/{server.pid}/fd"))
        for index in range(idle_connection_count()):
            address = f"127.0.{1 + index // 4 // 250}.{1 + index // 4 % 250}"
            if address == "127.0.1.1":
                address = "127.0.11.1"  # not the client's address
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(address, 0)))
        counts = authorized_calls(port, 5)
        fds_during = len(os.listdir(f"/proc/{server.pid}/fd"))
    finally:
        for sock in idle:
            sock.close()
        server.terminate()
        server.wait(30)
    assert counts["connections"] == len(idle) + 1  # each was accepted (none refused: 4 per address)...
    closed = counts["evicted_connections"] + counts["closed_before_a_call"]
    assert closed >= len(idle) - ServerLimits().max_connections, counts  # ...and all but the last 16 closed
    assert fds_during - fds_before <= 2 * ServerLimits().max_connections + 2, (fds_before, fds_during)


def test_the_cli_takes_the_ban_options_and_refuses_a_zero_ban_in_one_line(tmp_path: Path) -> None:
    result = cli(tmp_path, "--max-peer-failures", "3", "--ban-time", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "ban_s must be > 0 s" in result.stderr, result.stderr
