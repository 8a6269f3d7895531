"""The processes of the policy server denial-of-service tests (test_policy_server_dos.py), one per host.

``server TOKEN_FILE``: a policy server with that token on 0.0.0.0 (so behind its connection front) serving a policy
whose inference takes INFERENCE_S (sleeping, as a GPU-bound model leaves the CPU); prints "serving PORT".
``client ADDRESS TOKEN_FILE CALLS``: the authorized client: CALLS Predict calls one after the other; prints a JSON
line with the codes (OK: a chunk of the policy's shape, all finite; WRONG_REPLY: another), each call's latency (s)
and the server's Stats counts.
``attack ADDRESS KIND COUNT SECONDS``: COUNT connections of KIND (`preface`: the HTTP/2 preface and SETTINGS, then
nothing; `silent`: TCP, nothing sent; `unauthenticated`: callers without the token, COUNT calls in flight at once)
for SECONDS, reopening what the server closes; prints "attacking" once they are open, "done N" at the end. The
callers' calls wait for a connection (wait_for_ready): each goes out as soon as the server takes one, and a channel
the server refuses does not spin the attacker on its own CPU (on one machine, a CPU the server shares).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np

PORT = 50871
INFERENCE_S = 0.02
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")
STATE = {"observation.state": np.zeros(6, np.float32)}


def server(token_file: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policy_server"))
    from fake_policy_server import SinePolicy

    from lerobot_policy_server.security import ServerSecurity, read_token
    from lerobot_policy_server.service import start_server

    class Inferring(SinePolicy):
        def predict(self, observation, task):  # type: ignore[no-untyped-def]
            time.sleep(INFERENCE_S)
            return super().predict(observation, task)

    served, port = start_server(Inferring(6, 15, 30.0, "none"), "0.0.0.0", PORT, ServerSecurity(read_token(token_file)))
    print(f"serving {port}", flush=True)
    threading.Event().wait(600)
    served.stop(0)


def client(address: str, token_file: str, calls: int) -> None:
    from lerobot_policy_server.client import PolicyClient, RemoteError
    from lerobot_policy_server.security import ClientSecurity

    codes: dict[str, int] = {}
    latencies = []
    with PolicyClient(f"grpc://{address}:{PORT}", 10.0, security=ClientSecurity.from_files(token_file)) as policy:
        policy.info()  # connected
        for index in range(calls):
            start = time.perf_counter()
            try:
                reply = policy.predict(STATE, stamp_ns=index + 1)
                sound = reply.actions.shape == (15, 6) and bool(np.isfinite(reply.actions).all())
                codes["OK" if sound else "WRONG_REPLY"] = codes.get("OK" if sound else "WRONG_REPLY", 0) + 1
            except RemoteError as err:
                codes[err.code.name] = codes.get(err.code.name, 0) + 1
            latencies.append(time.perf_counter() - start)
        counts = policy.stats()["counts"]
    print(json.dumps({"codes": codes, "latencies": latencies, "counts": counts}), flush=True)


def attack(address: str, kind: str, count: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    done = [0]
    if kind == "unauthenticated":
        import grpc

        from lerobot_policy_server import protocol

        channel = grpc.insecure_channel(f"{address}:{PORT}")
        info = channel.unary_unary(f"/{protocol.SERVICE}/Info")

        def caller() -> None:
            while time.monotonic() < end:
                with contextlib.suppress(grpc.RpcError):
                    info(protocol.encode_info_request(), timeout=5, wait_for_ready=True)
                done[0] += 1

        threads = [threading.Thread(target=caller, daemon=True) for _ in range(count)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # under way, as the connection attacks below
        print("attacking", flush=True)
        for thread in threads:
            thread.join()
        channel.close()
    else:

        def hold() -> None:
            while time.monotonic() < end:
                try:
                    with socket.create_connection((address, PORT), timeout=5) as sock:
                        if kind == "preface":
                            sock.sendall(PREFACE)
                        done[0] += 1
                        sock.settimeout(max(0.01, end - time.monotonic()))
                        while sock.recv(4096):  # until the server closes it (or the attack ends)
                            pass
                except OSError:
                    time.sleep(0.05)

        threads = [threading.Thread(target=hold, daemon=True) for _ in range(count)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        print("attacking", flush=True)
        for thread in threads:
            thread.join()
    print(f"done {done[0]}", flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "server":
        server(args[0])
    elif command == "client":
        client(args[0], args[1], int(args[2]))
    else:
        attack(args[0], args[1], int(args[2]), float(args[3]))
