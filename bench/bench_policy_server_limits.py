"""What a client can make the policy server hold, with this tree's defaults and with a baseline commit's server in
the same run: the server process's memory under 4 concurrent 255 MB Predict frames, under N silent TCP
connections (and how many it still holds after 15 s), and the status codes of 10,000 concurrent Info calls on
one connection. The server (a numpy policy, tests/policy_server/fake_policy_server.py's SinePolicy) runs in its
own process so that its memory is its own (VmHWM / VmRSS from /proc). Writes
bench/results/policy_server_limits.json.

    .venv/bin/python bench/bench_policy_server_limits.py [--baseline 61216f4] [--connections 2000]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

import grpc
import numpy as np

REPO = Path(__file__).resolve().parents[1]
SERVER = """
import sys
sys.path.insert(0, sys.argv[1])
from fake_policy_server import SinePolicy
from lerobot_policy_server.service import serve_forever, start_server
server, port = start_server(SinePolicy(6, 15, 30.0, "none"), "127.0.0.1", 0)
print(port, flush=True)
serve_forever(server, grace_s=0.2)
"""


def memory_mb(pid: int) -> dict[str, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: round(int(fields[key].split()[0]) / 1024, 1) for key in ("VmRSS", "VmHWM")}


def start(tree: Path) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(tree / "policy_server")}
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(tree / "tests" / "policy_server")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def big_frames(port: int, protocol: Any) -> dict[str, Any]:
    frame = protocol.encode_predict_request(
        protocol.PredictRequest(
            0, "", {"observation.state": np.zeros(6, np.float32), "pad": np.zeros(255 << 20, np.uint8)}
        )
    )
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 1 << 30)]) as channel:
        predict = channel.unary_unary(f"/{protocol.SERVICE}/Predict")
        calls = [predict.future(frame, timeout=300) for _ in range(4)]
        return dict(collections.Counter(call.code().name for call in calls))


def silent_connections(port: int, count: int, pid: int) -> dict[str, Any]:
    sockets = []
    for _ in range(count):
        try:
            sockets.append(socket.create_connection(("127.0.0.1", port)))
        except OSError:
            break
    time.sleep(2)
    at_2s = memory_mb(pid)["VmRSS"]
    time.sleep(13)
    held = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            while sock.recv(65536):
                pass
        except BlockingIOError:
            held += 1
        except OSError:
            pass
    result = {"opened": len(sockets), "rss_mb_after_2s": at_2s, "held_after_15s": held}
    result["rss_mb_after_15s"] = memory_mb(pid)["VmRSS"]
    for sock in sockets:
        sock.close()
    return result


def flood(port: int, protocol: Any, calls: int) -> dict[str, int]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        info = channel.unary_unary(f"/{protocol.SERVICE}/Info")
        futures = [info.future(protocol.encode_info_request(), timeout=120) for _ in range(calls)]
        return dict(collections.Counter(future.code().name for future in futures))


def measure(tree: Path, connections: int, protocol: Any) -> dict[str, Any]:
    process, port = start(tree)
    try:
        result: dict[str, Any] = {"idle": memory_mb(process.pid)}
        result["predict_4x255MB"] = {"codes": big_frames(port, protocol), "server": memory_mb(process.pid)}
        result["flood_10000_info_one_connection"] = flood(port, protocol, 10_000)
        result["silent_connections"] = silent_connections(port, connections, process.pid)
        return result
    finally:
        process.terminate()
        process.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="61216f4", help="commit whose server is the baseline")
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "policy_server_limits.json")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.connections + 256)), hard))
    from lerobot_policy_server import protocol

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    results: dict[str, Any] = {"machine": platform.machine(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as scratch:
        archive = subprocess.run(
            ["git", "archive", args.baseline, "policy_server", "tests/policy_server"], cwd=REPO, capture_output=True,
            check=True,
        ).stdout  # fmt: skip
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(scratch, filter="data")
        results[f"baseline {args.baseline}"] = measure(Path(scratch), args.connections, protocol)
    results[f"this tree ({commit.strip()})"] = measure(REPO, args.connections, protocol)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
