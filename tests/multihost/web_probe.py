"""Requests to a web viewer served beyond loopback, as a browser elsewhere makes them (run inside the namespace).

`python web_probe.py URL` (the URL with ?token= that `--web --host` printed) prints one JSON object: the status of
the page without the token, with a wrong one, with the token (and the redirect and cookie it gets), of the page and
a data (gRPC-web ReadMessages) request carrying the cookie, the first bytes of the data stream, and whether the
data port answers on the LAN address.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import time
from urllib.parse import urlsplit

READ_MESSAGES = "/rerun.sdk_comms.v1alpha1.MessageProxyService/ReadMessages"
GRPC_WEB = {"Content-Type": "application/grpc-web+proto"}
EMPTY_REQUEST = b"\0\0\0\0\0"  # one gRPC-web frame holding an empty message


def get(
    host: str, port: int, method: str, path: str, headers: dict[str, str], body: bytes = b"", limit: int = 65536
) -> tuple[int, dict[str, str], bytes]:
    """One request; the status, headers and the first `limit` bytes of the body (a data stream never ends)."""
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(data) < limit:
            try:
                chunk = answer.read1(4096)
            except TimeoutError:
                break  # a stream that has sent what it holds
            if not chunk:
                break
            data += chunk
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, data
    finally:
        conn.close()


def main(url: str, data_port: int) -> dict[str, object]:
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    token = dict(q.split("=", 1) for q in parts.query.split("&"))["token"]
    result: dict[str, object] = {}
    result["no_token"] = get(host, port, "GET", "/", {})[0]
    result["wrong_token"] = get(host, port, "GET", "/?token=not-the-token-not-the-token", {})[0]
    result["data_without_token"] = get(host, port, "POST", READ_MESSAGES, GRPC_WEB, EMPTY_REQUEST)[0]
    status, headers, _ = get(host, port, "GET", f"/?token={token}", {})
    result["with_token"], result["location"] = status, headers.get("location")
    cookie = headers.get("set-cookie", "").split(";")[0]
    result["cookie_set"] = bool(cookie)
    status, _, page = get(host, port, "GET", str(headers.get("location")), {"Cookie": cookie})
    result["page"], result["page_loads_viewer"] = status, b"re_viewer" in page
    status, headers, stream = get(
        host, port, "POST", READ_MESSAGES, {"Cookie": cookie, **GRPC_WEB}, EMPTY_REQUEST, 2048
    )
    result["data"], result["data_type"] = status, headers.get("content-type")
    result["data_names_recording"] = b"lerobot_ros_dataset_view" in stream
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.settimeout(5)
        result["data_port_on_lan"] = probe.connect_ex((host, data_port)) == 0
    return result


if __name__ == "__main__":
    json.dump(main(sys.argv[1], int(sys.argv[2])), sys.stdout)
