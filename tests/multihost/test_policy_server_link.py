"""The policy server's client over a wire with a real round trip (two network namespaces, 20 ms one way).

gRPC core takes `grpc.min_reconnect_backoff_ms` as the shortest time it allows a connection attempt (TCP and
HTTP/2 handshakes). The client set it to 100 ms for quick reconnects, so every server more than ~50 ms of round
trip away was "unreachable: connection attempt timed out" at the first call, on every retry. Found by
test_two_hosts.py's policy-server variant at 20 ms one way; here with a bare gRPC server (about 10 s).
"""

from __future__ import annotations

import sys

import pytest
from harness import Link, two_hosts, unavailable

pytestmark = pytest.mark.ros

SERVER = """
import grpc, time
from concurrent import futures
server = grpc.server(futures.ThreadPoolExecutor(2))
server.add_insecure_port("0.0.0.0:50853")
server.start()
print("listening", flush=True)
time.sleep(120)
"""
CLIENT = """
from lerobot_policy_server.client import PolicyClient, RemoteError
with PolicyClient("grpc://{address}:50853", timeout_s=5.0) as client:
    try:
        client.info()
    except RemoteError as err:
        print("answer:", err.code.name, err)
"""


def test_client_connects_to_a_server_20_ms_away(processes, tmp_path):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with two_hosts(tmp_path / "hosts") as hosts:
        wire = processes.start(hosts.wire_command(Link(delay_ms=20), tmp_path / "wire.json"), name="wire")
        wire.wait_for_output("wire up", timeout=30)
        server = processes.start(hosts.command("inference", [sys.executable, "-c", SERVER]), name="server")
        server.wait_for_output("listening", timeout=60)
        client = processes.start(
            hosts.command("robot", [sys.executable, "-c", CLIENT.format(address=hosts.address["inference"])]),
            name="client",
        )
        client.wait(timeout=60)
        processes.stop_all()
    # The bare server has no such method: UNIMPLEMENTED means the call reached it; UNAVAILABLE means it did not.
    assert "answer: UNIMPLEMENTED" in client.output(), client.output()
