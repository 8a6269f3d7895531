"""The web viewer of `--web` listens on loopback by default; beyond loopback only its token proxy listens, and lets
a request through only with the token (lerobot_recorder.view.web). The whole command beyond loopback, in a network
namespace, is in tests/multihost/test_port_scan.py."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from lerobot_dataset import DatasetWriter, FeatureSpec
from lerobot_recorder.view.web import TokenProxy, Upstreams
from lerobot_ros.command import CommandError
from lerobot_ros.testing import venv_script

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "multihost"))

from browser import served_output  # noqa: E402
from netscan import bound_sockets  # noqa: E402
from test_view_command import CONTRACT, run_view  # noqa: E402

TOKEN = "t0ken-for-the-view-test-0123456789"
GRPC_PATH = "/rerun.sdk_comms.v1alpha1.MessageProxyService/ReadMessages"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def small_dataset(root: Path) -> Path:
    names = ["a.pos", "b.pos"]
    spec = FeatureSpec("float32", (2,), names)
    writer = DatasetWriter.create(
        root, repo_id="local/web", fps=30, features={"observation.state": spec, "action": spec}
    )
    writer.start_episode("wave")
    for step in range(10):
        writer.add_frame({"observation.state": np.full(2, step, np.float32), "action": np.full(2, step, np.float32)})
    writer.save_episode()
    writer.close()
    return root


def test_web_viewer_listens_on_loopback_only_by_default(tmp_path):
    root = small_dataset(tmp_path / "ds")
    web_port, grpc_port = free_port(), free_port()
    argv = [venv_script("lerobot-ros"), "dataset", "view", str(root), "--web", "--port", str(web_port),
            "--grpc-port", str(grpc_port)]  # fmt: skip
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = served_output(server)
        assert f"web viewer at http://127.0.0.1:{web_port}/?url=" in output, output
        assert "listening on 127.0.0.1 only" in output, output
        bound = {(s.address, s.port) for s in bound_sockets() if s.proto == "tcp" and s.port in (web_port, grpc_port)}
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert bound == {("127.0.0.1", web_port), ("127.0.0.1", grpc_port)}, bound


class _Page(BaseHTTPRequestHandler):
    """The viewer page server stand-in: answers `page:<path>` and the headers it got."""

    def do_GET(self) -> None:
        body = f"page:{self.path}\n{''.join(f'{k}: {v}' + chr(10) for k, v in self.headers.items())}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Stream:
    """The data server stand-in: reads one request, sends a first chunk, the rest only after `release`."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.release = threading.Event()
        self.request = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(65536)
            head, _, body = self.request.partition(b"\r\n\r\n")
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            while len(body) < length:
                body += conn.recv(65536)
            self.request = head + b"\r\n\r\n" + body
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/grpc-web+proto\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")  # fmt: skip
            self.release.wait(30)
            conn.sendall(b"4\r\nlast\r\n0\r\n\r\n")


@pytest.fixture
def proxy():
    page = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    stream = _Stream()
    port = free_port()
    proxy = TokenProxy("127.0.0.1", port, TOKEN, Upstreams(page.server_address[1], stream.port))
    proxy.start()
    try:
        yield proxy, stream
    finally:
        stream.release.set()
        proxy.close()
        page.shutdown()
        stream.sock.close()
    assert proxy.problem() is None


def request(proxy: TokenProxy, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""):
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    conn.request(method, path, body=body or None, headers=headers or {})
    return conn, conn.getresponse()


def test_requests_without_the_token_are_refused(proxy):
    proxy, _ = proxy
    for path, headers, status in [
        ("/", {}, 401),
        ("/re_viewer.js", {}, 401),
        (GRPC_PATH, {}, 401),
        ("/?token=wrong-token-wrong-token", {}, 403),
        ("/", {"Cookie": f"{proxy.cookie_name}=wrong-token-wrong-token"}, 403),
        ("/", {"Authorization": "Bearer wrong-token-wrong-token"}, 403),
        ("/", {"Cookie": f"lerobot_ros_view_1={TOKEN}"}, 401),  # another viewer's cookie
    ]:
        conn, answer = request(proxy, "GET", path, headers)
        assert answer.status == status, (path, headers, answer.status, answer.read())
        conn.close()


def test_the_token_once_sets_a_cookie_and_the_data_url_of_this_origin(proxy):
    proxy, _ = proxy
    conn, answer = request(proxy, "GET", f"/?token={TOKEN}", {"Host": "robot.local:9090"})
    assert answer.status == 303
    assert answer.getheader("Location") == "/?url=rerun%2Bhttp%3A%2F%2Frobot.local%3A9090%2Fproxy"
    cookie = answer.getheader("Set-Cookie")
    assert cookie == f"{proxy.cookie_name}={TOKEN}; Path=/; HttpOnly; SameSite=Strict"
    conn.close()
    conn, answer = request(proxy, "GET", "/re_viewer.js", {"Cookie": f"other=1; {cookie.split(';')[0]}"})
    body = answer.read().decode()
    assert answer.status == 200 and body.startswith("page:/re_viewer.js\n"), body
    assert TOKEN not in body, "the token went on to Rerun's server"
    conn.close()
    conn, answer = request(proxy, "GET", f"/?token={TOKEN}", {"Host": "bad host\x7f"})
    assert answer.status == 400
    conn.close()


def test_data_requests_are_forwarded_and_streamed(proxy):
    proxy, stream = proxy
    conn, answer = request(
        proxy, "POST", GRPC_PATH, {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/grpc-web+proto"},
        body=b"\0\0\0\0\0",
    )  # fmt: skip
    assert answer.status == 200
    assert answer.read1(5) == b"first", "the first chunk waits for the end of the stream"
    stream.release.set()
    assert answer.read() == b"last"
    conn.close()
    assert stream.request.startswith(f"POST {GRPC_PATH} HTTP/1.1\r\n".encode())
    assert stream.request.endswith(b"\r\n\r\n\0\0\0\0\0")
    assert b"Authorization" not in stream.request and b"Connection: close" in stream.request


def test_a_chunked_request_body_is_refused(proxy):
    proxy, _ = proxy
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
        conn.sendall(f"POST {GRPC_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n".encode())  # fmt: skip
        assert conn.recv(4096).startswith(b"HTTP/1.1 411 Length Required\r\n")


def test_idle_connections_are_bounded_and_closed(proxy, monkeypatch):
    """Hostile round 4: 8,000 connections that sent nothing were all held, with no timeout (35 -> 8,035 fds)."""
    from lerobot_recorder.view import web

    proxy, _ = proxy
    monkeypatch.setattr(web, "HEAD_TIMEOUT_S", 0.5)
    socks = [
        socket.create_connection(("127.0.0.1", proxy.port), timeout=30) for _ in range(web.MAX_CONNECTIONS_PER_PEER + 8)
    ]
    try:
        for sock in socks:  # the 8 beyond one address's limit at once, the others when their head is late
            assert sock.recv(4096) == b""
        assert proxy.held() == 0
        assert proxy.refused == {"connections": 8, "timed_out": web.MAX_CONNECTIONS_PER_PEER}
        conn, answer = request(proxy, "GET", "/re_viewer.js", {"Authorization": f"Bearer {TOKEN}"})
        assert answer.status == 200
        conn.close()
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--host", "0.0.0.0"], "--host and --token-file are options of --web"),
        (["--web", "--token-file", "/nonexistent"], "--token-file: the web viewer on loopback (127.0.0.1) takes no"),
        (["--web", "--port", "9999", "--grpc-port", "9999"], "--port and --grpc-port are both 9999"),
        (["--web", "--host", "robot.local"], "--host robot.local: give an IP address of this machine"),
    ],
)
def test_web_options_that_do_not_fit_are_one_line(argv, message):
    with pytest.raises(CommandError) as err:
        run_view(str(CONTRACT), *argv)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_short_token_is_refused_before_anything_listens(tmp_path, monkeypatch):
    token_file = tmp_path / "token"
    token_file.write_text("short\n")
    with pytest.raises(CommandError, match=r"--token-file .*token: the token must be at least 16 characters"):
        run_view(str(CONTRACT), "--web", "--host", "0.0.0.0", "--token-file", str(token_file))
    monkeypatch.setenv("LEROBOT_ROS_VIEW_TOKEN", "has spaces in it, too short")
    with pytest.raises(CommandError, match=r"LEROBOT_ROS_VIEW_TOKEN: the token must be"):
        run_view(str(CONTRACT), "--web", "--host", "0.0.0.0")


def test_a_data_port_in_use_is_named(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=rf"--grpc-port {port} is in use on 127.0.0.1"):
            run_view(str(CONTRACT), "--web", "--grpc-port", str(port), "--port", str(free_port()))
