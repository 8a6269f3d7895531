"""The web viewer of `--web`: Rerun's viewer page and its data (gRPC) server, on loopback unless asked otherwise.

Rerun's Python SDK (`serve_grpc`, `serve_web_viewer`) always listens on every interface, without a way to
choose the address or to check who connects. So the servers run in a child `rerun --serve-web --bind 127.0.0.1`
(the viewer executable of rerun-sdk, which can bind an address) and the view is sent to it over loopback.

Beyond loopback (`--host ADDRESS`), the Rerun servers stay on loopback and `TokenProxy` listens on ADDRESS: one
port that serves the viewer page and forwards the page's gRPC-web data requests (paths `/rerun.<service>/...`)
to the loopback data port, each request only with the token (`?token=` once, which sets a cookie, or
`Authorization: Bearer`); without it 401, with a wrong one 403. Rerun's data port checks no token, so it never
listens beyond loopback: a native viewer elsewhere reaches it through an SSH tunnel.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import ipaddress
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

LOOPBACK = "127.0.0.1"
TOKEN_ENV = "LEROBOT_ROS_VIEW_TOKEN"
MIN_TOKEN_CHARS = 16
SERVER_MEMORY_LIMIT = "1GiB"  # what rerun.serve_grpc buffers for viewers that connect late
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9._~-]+$")
_HOST_HEADER = re.compile(r"^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "transfer-encoding",
    "upgrade", "host", "cookie", "authorization",
}  # fmt: skip
_MAX_HEAD = 64 * 1024
# The token proxy's bounds: a request head must arrive within HEAD_TIMEOUT_S of connecting; a request body
# must keep coming (BODY_IDLE_S); connections held at once per client address and in all.
HEAD_TIMEOUT_S = 10.0
BODY_IDLE_S = 30.0
MAX_CONNECTIONS_PER_PEER = 32
MAX_CONNECTIONS = 256


class WebViewerError(Exception):
    """The web viewer cannot be served as asked (address, port, token or the Rerun server)."""


def resolve_host(host: str) -> str:
    """`host` (an IP address, or `localhost`) as an IP address; WebViewerError for anything else."""
    if host == "localhost":
        return LOOPBACK
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        raise WebViewerError(
            f"--host {host}: give an IP address of this machine (127.0.0.1: this machine only, the default; "
            "0.0.0.0: every interface; or one interface's address)"
        ) from None


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def read_token(token_file: Path | None, environ: Mapping[str, str]) -> str:
    """The viewer's token: the first line of `token_file`, else $LEROBOT_ROS_VIEW_TOKEN, else a new random one."""
    if token_file is not None:
        try:
            lines = Path(token_file).read_text().splitlines()
        except OSError as err:
            raise WebViewerError(f"--token-file {token_file}: cannot read it ({err.strerror})") from None
        token, source = (lines[0].strip() if lines else ""), f"--token-file {token_file}"
    elif environ.get(TOKEN_ENV):
        token, source = environ[TOKEN_ENV].strip(), TOKEN_ENV
    else:
        return secrets.token_urlsafe(24)
    if len(token) < MIN_TOKEN_CHARS or not _TOKEN_CHARS.match(token):
        raise WebViewerError(
            f"{source}: the token must be at least {MIN_TOKEN_CHARS} characters of A-Z a-z 0-9 . _ ~ - "
            f"(e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )
    return token


def server_executable() -> str | None:
    """The Rerun binary itself (rerun-sdk's `rerun_cli/rerun`), not the `rerun` script that wraps it in a Python
    process: the binary is the direct child, so it gets the parent-death signal."""
    try:
        import rerun_cli
    except ImportError:
        return shutil.which("rerun")
    binary = Path(rerun_cli.__file__).parent / "rerun"
    return str(binary) if binary.is_file() else shutil.which("rerun")


def _check_port_free(port: int, what: str) -> None:
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError as err:
            raise WebViewerError(f"{what} {port} is in use on {LOOPBACK} ({err.strerror}); choose another") from None


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _url_host(address: str) -> str:
    """How `address` is written in a URL; the machine's name when it is every interface."""
    if ipaddress.ip_address(address).is_unspecified:
        return socket.gethostname()
    return f"[{address}]" if ":" in address else address


class RerunServer:
    """A child `rerun --serve-web` bound to loopback: the viewer page on `web_port`, the data on `grpc_port`.

    The child gets SIGTERM when this process dies (even by SIGKILL), so no server outlives the view.
    """

    def __init__(self, executable: str, web_port: int, grpc_port: int, cors_origins: tuple[str, ...] = ()) -> None:
        from lerobot_ros.parent_death import parent_death_signal

        self.web_port, self.grpc_port = web_port, grpc_port
        self._lines: collections.deque[str] = collections.deque(maxlen=20)
        argv = [executable, "--serve-web", "--bind", LOOPBACK, "--port", str(grpc_port), "--web-viewer-port",
                str(web_port), "--server-memory-limit", SERVER_MEMORY_LIMIT]  # fmt: skip
        for origin in cors_origins:
            argv += ["--cors-allow-origin", origin]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            errors="replace", start_new_session=True,
            preexec_fn=parent_death_signal(signal.SIGTERM),  # noqa: PLW1509 - one prctl call in the child
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read_output, name="rerun-server-output", daemon=True)
        self._reader.start()

    def _read_output(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            text = _ANSI.sub("", line).strip()
            if text:
                self._lines.append(text)

    @property
    def data_url(self) -> str:
        return f"rerun+http://{LOOPBACK}:{self.grpc_port}/proxy"

    def last_words(self) -> str:
        """The child's last output line worth showing (its error when it exited)."""
        self._reader.join(timeout=1.0)
        for line in reversed(self._lines):
            return line
        return "no output"

    def problem(self) -> str | None:
        code = self.process.poll()
        if code is None:
            return None
        return f"the Rerun server exited (status {code}): {self.last_words()}"

    def wait_listening(self, timeout_s: float = 60.0) -> None:
        """Until both ports accept connections; WebViewerError when the child exits or `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        pending = {self.web_port, self.grpc_port}
        while pending:
            problem = self.problem()
            if problem is not None:
                raise WebViewerError(problem)
            for port in list(pending):
                try:
                    socket.create_connection((LOOPBACK, port), timeout=0.5).close()
                    pending.discard(port)
                except OSError:
                    pass
            if pending and time.monotonic() > deadline:
                self.close()
                raise WebViewerError(f"the Rerun server did not listen on {LOOPBACK} ports {sorted(pending)} "
                                     f"within {timeout_s:g} s: {self.last_words()}")  # fmt: skip
            if pending:
                time.sleep(0.1)

    def close(self) -> None:
        """Stop the child and anything it started (its own process group)."""
        for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, None)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.process.wait()
        self._reader.join(timeout=2.0)


@dataclass(frozen=True)
class Upstreams:
    """Where TokenProxy forwards: the viewer page server and the data (gRPC-web) server, both on loopback."""

    web_port: int
    grpc_port: int

    def port_for(self, path: str) -> int:
        # gRPC paths are /<package>.<Service>/<Method>; Rerun's packages all start with "rerun.".
        return self.grpc_port if path.startswith("/rerun.") else self.web_port


class TokenProxy:
    """An HTTP/1.1 reverse proxy on (host, port) that lets a request through only with the token.

    A request carrying `?token=` is answered with a redirect to the same page without it (and, for the page
    itself, with the data URL of this origin), setting an HttpOnly, SameSite=Strict cookie the page's later
    requests carry; `Authorization: Bearer <token>` works too. Each connection carries one request
    (`Connection: close`), so every request is checked; responses are streamed as they come (the viewer's data
    stream never ends). A connection whose request head has not arrived within `HEAD_TIMEOUT_S`, or whose body
    stalls for `BODY_IDLE_S`, is closed; connections beyond `MAX_CONNECTIONS_PER_PEER` from one address or
    `MAX_CONNECTIONS` in all are closed at once (`refused` counts what was closed). The event loop runs in its
    own thread; `problem()` says when it has died.
    """

    def __init__(self, host: str, port: int, token: str, upstreams: Upstreams) -> None:
        self.host, self.port, self.upstreams = host, port, upstreams
        self._token = token.encode()
        self.cookie_name = f"lerobot_ros_view_{port}"
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._closed = False
        self._held: collections.Counter[str] = collections.Counter()
        self.refused = collections.Counter[str]()
        self._thread = threading.Thread(target=self._run, name="view-token-proxy", daemon=True)

    def start(self) -> None:
        """Listen; WebViewerError when (host, port) cannot be bound."""
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            err = self._error
            reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            raise WebViewerError(f"cannot listen on {self.host} port {self.port} ({reason}); give an address "
                                 "of this machine with --host and a free --port")  # fmt: skip

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, self.host, self.port, limit=_MAX_HEAD, reuse_address=True)
            )
        except OSError as err:
            self._error = err
            self._started.set()
            return
        self._started.set()
        try:
            self._loop.run_forever()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except BaseException as err:
            self._error = err
        finally:
            self._loop.close()

    def problem(self) -> str | None:
        if self._closed or self._thread.is_alive() or not self._started.is_set():
            return None
        return f"the web viewer's proxy stopped: {self._error!r}"

    def close(self) -> None:
        self._closed = True
        if not self._thread.is_alive():
            return

        def stop() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(timeout=5.0)

    def _authorized(self, headers: dict[str, str], query_token: str | None) -> bool | None:
        """True with the right token, False with a wrong one, None without any."""
        offered = []
        if query_token is not None:
            offered.append(query_token)
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            offered.append(auth[7:].strip())
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie_name:
                offered.append(value)
        if not offered:
            return None
        return any(hmac.compare_digest(value.encode(), self._token) for value in offered)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = str(peername[0]) if peername else "?"
        if self._held[peer] >= MAX_CONNECTIONS_PER_PEER or self._held.total() >= MAX_CONNECTIONS:
            self.refused["connections"] += 1
            writer.transport.abort()
            return
        self._held[peer] += 1
        try:
            await self._handle(reader, writer)
        except TimeoutError:
            self.refused["timed_out"] += 1
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # a client that went away or sent garbage: this connection only
        finally:
            self._held[peer] -= 1
            if not self._held[peer]:
                del self._held[peer]
            writer.close()

    def held(self) -> int:
        """Client connections open now."""
        return self._held.total()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        query = parse_qsl(url.query, keep_blank_values=True)
        query_token = next((v for k, v in query if k == "token"), None)
        allowed = self._authorized(headers, query_token)
        if allowed is None:
            await _reply(writer, 401, "this web viewer needs its token: open the URL with ?token= that the "
                                      "view command printed", {"WWW-Authenticate": "Bearer"})  # fmt: skip
            return
        if not allowed:
            await _reply(writer, 403, "wrong token for this web viewer")
            return
        rest = [(k, v) for k, v in query if k != "token"]
        if method == "GET" and (query_token is not None or (url.path == "/" and not any(k == "url" for k, _ in rest))):
            await self._redirect(writer, headers, url.path, rest)
            return
        if "transfer-encoding" in headers:
            await _reply(writer, 411, "send the request body with a Content-Length")
            return
        await self._forward(reader, writer, method, target, headers)

    async def _redirect(
        self, writer: asyncio.StreamWriter, headers: dict[str, str], path: str, query: list[tuple[str, str]]
    ) -> None:
        host = headers.get("host", "")
        if path == "/" and not any(k == "url" for k, _ in query):
            if not _HOST_HEADER.match(host):
                await _reply(writer, 400, "missing or malformed Host header")
                return
            query = [("url", f"rerun+http://{host}/proxy"), *query]
        location = path + ("?" + urlencode(query, quote_via=quote) if query else "")
        cookie = f"{self.cookie_name}={self._token.decode()}; Path=/; HttpOnly; SameSite=Strict"
        await _reply(writer, 303, "", {"Location": location, "Set-Cookie": cookie})

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        method: str,
        target: str,
        headers: dict[str, str],
    ) -> None:
        port = self.upstreams.port_for(urlsplit(target).path)
        length = int(headers.get("content-length", "0") or "0")
        if length < 0:
            raise ValueError("negative Content-Length")
        up_reader, up_writer = await asyncio.open_connection(LOOPBACK, port)
        try:
            out = [f"{method} {target} HTTP/1.1", f"Host: {LOOPBACK}:{port}", "Connection: close"]
            out += [f"{k}: {v}" for k, v in headers.items() if k not in _HOP_BY_HOP]
            up_writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            while length > 0:
                chunk = await asyncio.wait_for(reader.read(min(length, 65536)), BODY_IDLE_S)
                if not chunk:
                    return
                up_writer.write(chunk)
                length -= len(chunk)
            await up_writer.drain()
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            up_writer.close()


async def _reply(writer: asyncio.StreamWriter, status: int, text: str, extra: Mapping[str, str] | None = None) -> None:
    reasons = {303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 411: "Length Required"}
    body = (text + "\n").encode() if text else b""
    head = [f"HTTP/1.1 {status} {reasons[status]}", "Content-Type: text/plain; charset=utf-8",
            f"Content-Length: {len(body)}", "Cache-Control: no-store", "Connection: close"]  # fmt: skip
    head += [f"{k}: {v}" for k, v in (extra or {}).items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


class WebViewer:
    """What `--web` serves: Rerun's servers on loopback, and beyond loopback the token proxy in front of them."""

    def __init__(self, executable: str, host: str, web_port: int, grpc_port: int, token: str | None) -> None:
        self.address = resolve_host(host)
        self.public = not is_loopback(self.address)
        self.web_port, self.grpc_port, self.token = web_port, grpc_port, token
        if self.public and token is None:
            raise WebViewerError("a web viewer beyond loopback needs a token")
        _check_port_free(grpc_port, "--grpc-port")
        origins: tuple[str, ...] = ()
        if self.public:
            rerun_web_port = free_loopback_port()
        else:
            _check_port_free(web_port, "--port")
            rerun_web_port = web_port
            origins = (f"http://{LOOPBACK}:{web_port}", f"http://localhost:{web_port}")
        self.server = RerunServer(executable, rerun_web_port, grpc_port, origins)
        self.proxy: TokenProxy | None = None
        try:
            self.server.wait_listening()
            if self.public:
                assert token is not None
                self.proxy = TokenProxy(self.address, web_port, token, Upstreams(rerun_web_port, grpc_port))
                self.proxy.start()
        except BaseException:
            self.server.close()
            raise

    @property
    def data_url(self) -> str:
        """Where the view is sent (the loopback data port)."""
        return self.server.data_url

    def describe(self) -> str:
        """Lines for the user: the URL to open, and where the servers listen."""
        if not self.public:
            data = quote(self.data_url, safe="")
            return (
                f"web viewer at http://{LOOPBACK}:{self.web_port}/?url={data} (listening on {LOOPBACK} only; from "
                f"another machine: ssh -L {self.web_port}:{LOOPBACK}:{self.web_port} -L {self.grpc_port}:{LOOPBACK}:"
                f"{self.grpc_port} {socket.gethostname()}, or serve it there with --host ADDRESS)"
            )
        shown = "every interface" if ipaddress.ip_address(self.address).is_unspecified else self.address
        return (
            f"web viewer at http://{_url_host(self.address)}:{self.web_port}/?token={self.token}\n"
            f"listening beyond this machine on {shown} port {self.web_port}: every request needs the token; "
            f"Rerun's data port {self.grpc_port} stays on {LOOPBACK}"
        )

    def problem(self) -> str | None:
        """Why the web viewer no longer serves (None while it does)."""
        return self.server.problem() or (self.proxy.problem() if self.proxy is not None else None)

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        self.server.close()
