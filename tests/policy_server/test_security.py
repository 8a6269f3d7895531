"""The policy server secure by default: loopback unless told otherwise, a token, TLS and mutual TLS, limits on
calls, request sizes and connections (each refusal counted on the Stats reply), and malformed frames typed."""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_policy_server import SinePolicy
from test_protocol_limits import deep_json_frame, huge_empty_tensor_frame

from lerobot_policy_server import protocol
from lerobot_policy_server.admission import REQUEST_OVERHEAD_BYTES, ServerLimits
from lerobot_policy_server.client import PolicyClient, RemoteError
from lerobot_policy_server.protocol import ErrorCode, FeatureSpec, PolicyInfo, PredictRequest
from lerobot_policy_server.security import ClientSecurity, ServerSecurity
from lerobot_policy_server.service import start_server

STATE = {"observation.state": np.zeros(6, np.float32)}


@pytest.fixture
def serve():
    started = []

    def start(policy=None, security=None, limits=None, host="127.0.0.1"):
        server, port = start_server(policy or SinePolicy(6, 15, 30.0, "none"), host, 0, security, limits)
        started.append(server)
        return port

    yield start
    for server in started:
        server.stop(0)


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # host-order 32-bit words
                text = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words)
                ip = ipaddress.ip_address(text)
                found.add(str(ip.ipv4_mapped or ip) if isinstance(ip, ipaddress.IPv6Address) else text)
    return found


def test_the_server_listens_on_loopback_only_by_default() -> None:
    server, port = start_server(SinePolicy(6, 15, 30.0, "none"), port=0)
    try:
        assert listening_addresses(port) == {"127.0.0.1"}
    finally:
        server.stop(0)


def test_the_cli_listens_on_loopback_by_default() -> None:
    import argparse

    from lerobot_policy_server.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["ckpt"]).host == "127.0.0.1"


def test_the_cli_refuses_every_interface_without_token_or_tls(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lerobot_policy_server", str(tmp_path), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("policy-server: error: refusing to listen on 0.0.0.0")
    assert "--token-file" in lines[0] and "--insecure" in lines[0]


def test_a_token_is_required_and_compared(serve) -> None:
    port = serve(security=ServerSecurity(token="correct-horse-battery-staple"))
    url = f"grpc://127.0.0.1:{port}"
    for security, why in ((None, "carries no token"), (ClientSecurity(token="wrong"), "is not this server's")):
        with PolicyClient(url, 5.0, security=security) as client, pytest.raises(RemoteError, match=why) as err:
            client.info()
        assert err.value.code is ErrorCode.UNAUTHENTICATED
        assert "\n" not in str(err.value)
    with PolicyClient(url, 5.0, security=ClientSecurity(token="correct-horse-battery-staple")) as client:
        assert client.info().policy_type == "fake_sine"
        assert client.predict(STATE, stamp_ns=1).actions.shape == (15, 6)
        counts = client.stats()["counts"]
    assert counts["refused_unauthenticated"] == 2


def test_a_token_file_and_the_environment_variable(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("abc123\n")
    assert ClientSecurity.from_files(str(tmp_path / "token")).token == "abc123"
    assert ClientSecurity.from_files(environ={"LEROBOT_POLICY_SERVER_TOKEN": "xyz"}).token == "xyz"
    with pytest.raises(ValueError, match=r"token file .*missing: cannot read it"):
        ClientSecurity.from_files(str(tmp_path / "missing"))


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> Path:
    """A throwaway CA and a server and a client certificate it signs (openssl CLI), for localhost / 127.0.0.1."""
    directory = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, capture_output=True, check=True, timeout=120)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=test-ca")  # fmt: skip
    for who in ("server", "client"):
        (directory / f"{who}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out", f"{who}.csr", "-subj",
                f"/CN={who}")  # fmt: skip
        openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
                f"{who}.pem", "-days", "2", "-extfile", f"{who}.ext")  # fmt: skip
    return directory


def test_tls_end_to_end(serve, certificates: Path) -> None:
    tls = {"tls_cert": str(certificates / "server.pem"), "tls_key": str(certificates / "server.key")}
    port = serve(security=ServerSecurity(**tls))
    url = f"grpc://127.0.0.1:{port}"
    with PolicyClient(url, 5.0, security=ClientSecurity(tls_ca=str(certificates / "ca.pem"))) as client:
        assert client.predict(STATE, stamp_ns=2).actions.shape == (15, 6)
    with PolicyClient(url, 2.0) as plain, pytest.raises(RemoteError) as err:  # no TLS: the handshake fails
        plain.info()
    assert err.value.code is ErrorCode.UNAVAILABLE


def test_mutual_tls_refuses_a_client_without_a_certificate(serve, certificates: Path) -> None:
    port = serve(
        security=ServerSecurity(
            tls_cert=str(certificates / "server.pem"),
            tls_key=str(certificates / "server.key"),
            client_ca=str(certificates / "ca.pem"),
        )
    )
    url = f"grpc://127.0.0.1:{port}"
    ca = str(certificates / "ca.pem")
    with PolicyClient(url, 2.0, security=ClientSecurity(tls_ca=ca)) as client, pytest.raises(RemoteError) as err:
        client.info()
    assert err.value.code is ErrorCode.UNAVAILABLE
    with_cert = ClientSecurity(
        tls_ca=ca, tls_cert=str(certificates / "client.pem"), tls_key=str(certificates / "client.key")
    )
    with PolicyClient(url, 5.0, security=with_cert) as client:
        assert client.info().policy_type == "fake_sine"


class BlockingPolicy(SinePolicy):
    """Predict says it started (`entered`) and waits until `release` is set."""

    def __init__(self) -> None:
        super().__init__(6, 15, 30.0, "none")
        self.entered = threading.Event()
        self.release = threading.Event()

    def predict(self, observation, task):
        self.entered.set()
        self.release.wait(60)
        return super().predict(observation, task)


def test_calls_beyond_the_concurrency_limit_are_refused_and_counted(serve) -> None:
    policy = BlockingPolicy()
    port = serve(policy, limits=ServerLimits(max_concurrent=1))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    predict = channel.unary_unary(f"/{protocol.SERVICE}/Predict")
    info = channel.unary_unary(f"/{protocol.SERVICE}/Info")
    running = predict.future(protocol.encode_predict_request(PredictRequest(0, "", STATE)), timeout=60)
    assert policy.entered.wait(60)
    for _ in range(5):
        with pytest.raises(grpc.RpcError) as err:
            info(protocol.encode_info_request(), timeout=10)
        assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    policy.release.set()
    assert len(running.result()) > 0
    with PolicyClient(f"grpc://127.0.0.1:{port}", 5.0) as client:
        assert client.stats()["counts"]["refused_busy"] == 5
    channel.close()


def test_an_oversize_request_is_refused_before_it_is_read_and_counted(serve) -> None:
    port = serve()
    with PolicyClient(f"grpc://127.0.0.1:{port}", 5.0) as client:
        limit = client.stats()["limits"]["max_request_bytes"]
        assert limit == 6 * 4 + REQUEST_OVERHEAD_BYTES  # sized from the policy's inputs
        for extra in (2 * limit, limit // 2):
            padded = {**STATE, "padding": np.zeros(extra, np.uint8)}
            with pytest.raises(RemoteError) as err:
                client.predict(padded, stamp_ns=3)
            assert err.value.code is ErrorCode.RESOURCE_EXHAUSTED
        counts = client.stats()["counts"]
    assert counts["refused_too_large"] == 1  # the larger one: refused by gRPC before it is buffered (not counted)


def test_a_connection_that_sends_nothing_is_closed(serve) -> None:
    port = serve(limits=ServerLimits(handshake_timeout_s=0.5, idle_timeout_s=0.5))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(30)
        while sock.recv(4096):  # the server's HTTP/2 settings, then the end: it closed the connection
            pass


def test_connections_beyond_the_limit_are_closed(serve) -> None:
    port = serve(limits=ServerLimits(max_connections=2, handshake_timeout_s=600))  # no handshake timeout here
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    try:
        socks[2].settimeout(30)
        while socks[2].recv(4096):  # the third: closed at once
            pass
        for sock in socks[:2]:  # the first two stay open
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                while sock.recv(4096):
                    pass
    finally:
        for sock in socks:
            sock.close()


def test_an_idle_client_connection_is_closed(serve) -> None:
    port = serve(limits=ServerLimits(idle_timeout_s=0.5))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    states: list[grpc.ChannelConnectivity] = []
    idle_again = threading.Event()

    def on_state(state: grpc.ChannelConnectivity) -> None:
        states.append(state)
        if grpc.ChannelConnectivity.READY in states and state is grpc.ChannelConnectivity.IDLE:
            idle_again.set()

    channel.subscribe(on_state)
    channel.unary_unary(f"/{protocol.SERVICE}/Info")(protocol.encode_info_request(), timeout=10)
    try:
        assert idle_again.wait(30), f"the server kept the idle connection: {states}"
    finally:
        channel.unsubscribe(on_state)
        channel.close()


@pytest.mark.parametrize(
    ("frame", "words"), [(deep_json_frame(), "nested deeper"), (huge_empty_tensor_frame(), "dimensions")]
)
def test_malformed_frames_are_invalid_argument_and_counted(serve, frame: bytes, words: str) -> None:
    port = serve()
    with PolicyClient(f"grpc://127.0.0.1:{port}", 5.0) as client:
        with pytest.raises(RemoteError, match=words) as err:
            client._call("Predict", frame, None)
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
        assert client.stats()["counts"]["malformed"] == 1


def test_a_flood_of_calls_on_one_connection_is_served_or_refused_never_cancelled(serve) -> None:
    """gRPC core cancelled calls once more than 1000 waited for the server's Python layer (10,000 at once)."""
    port = serve()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    info = channel.unary_unary(f"/{protocol.SERVICE}/Info")
    calls = [info.future(protocol.encode_info_request(), timeout=120) for _ in range(10_000)]
    codes: dict[str, int] = {}
    for call in calls:
        code = call.code().name
        codes[code] = codes.get(code, 0) + 1
    channel.close()
    assert set(codes) <= {"OK", "RESOURCE_EXHAUSTED"}, codes
    assert codes.get("OK", 0) > 0


def test_info_carries_what_a_client_needs_and_no_paths_versions_or_contract_file() -> None:
    info = PolicyInfo(
        policy_type="act", name="/home/me/runs/secret/pretrained_model", backend="lerobot", device="cpu",
        inputs=(FeatureSpec("observation.state", (6,), "float32", False),), action_dim=6, horizon=5,
        fps=30.0, contract={"fps": 30, "features": {}}, versions={"lerobot": "0.4.4", "torch": "2.13.0"},
    )  # fmt: skip
    header = json.loads(protocol.encode_info(info)[12:])
    assert header["name"] == "pretrained_model"  # the directory's name, not where it lies
    assert "versions" not in header and "contract_yaml" not in header
    assert header["contract"] == {"fps": 30, "features": {}}  # the contract's content, as data
    decoded = protocol.decode_info(protocol.encode_info(info))
    assert (decoded.inputs, decoded.fps, decoded.horizon, decoded.action_dim) == (info.inputs, 30.0, 5, 6)
    assert decoded.versions == {} and decoded.contract == info.contract
