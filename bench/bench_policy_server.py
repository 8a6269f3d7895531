"""The policy server's transport cost on one host: Predict round trips over loopback with a policy that does no
work (a numpy copy of the state), so what is measured is framing + gRPC + the copies, per camera setting.

For 0, 1 and 2 cameras of 640x480 (uint8, as the policy node sends them; a camera-like picture with sensor
noise) plus a 6-value state, and for 1 camera sent as JPEG (quality 90) and PNG: bytes per request, encode
time of the request frame (compressing the images included), the server's decode time (decompressing
included), and the round-trip time of `PolicyClient.predict` (p50 / p90 over `--calls`). Writes
bench/results/policy_server.json. Across hosts (a rate-limited link) is bench_multihost.py --compression.

    .venv/bin/python bench/bench_policy_server.py [--calls 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "policy_server"))
from fake_policy_server import SinePolicy, camera_like_image  # noqa: E402

from lerobot_policy_server import images as image_codec  # noqa: E402
from lerobot_policy_server import protocol  # noqa: E402
from lerobot_policy_server.client import PolicyClient  # noqa: E402
from lerobot_policy_server.protocol import FeatureSpec, PredictRequest  # noqa: E402
from lerobot_policy_server.service import start_server  # noqa: E402


def percentiles(values: list[float]) -> dict[str, float]:
    ms = np.asarray(values) * 1e3
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p90_ms": round(float(np.percentile(ms, 90)), 3)}


def measure(cameras: int, calls: int, encoding: str = "raw") -> dict[str, object]:
    policy = SinePolicy(6, 30, 30.0, "none")
    images = tuple(FeatureSpec(f"observation.images.cam{i}", (480, 640, 3), "uint8", True) for i in range(cameras))
    policy.info = dataclasses.replace(policy.info, inputs=policy.info.inputs + images)
    rng = np.random.default_rng(0)
    observation = {"observation.state": np.zeros(6, np.float32)}
    for spec in images:
        observation[spec.key] = camera_like_image(*spec.shape[:2], seed=int(rng.integers(1000)))
    encode, decode = [], []
    for _ in range(calls):
        start = time.perf_counter()
        arrays, encoded = image_codec.compress_observation(observation, encoding)
        frame = protocol.encode_predict_request(PredictRequest(0, "pick the cube", arrays, encoded))
        encode.append(time.perf_counter() - start)
        start = time.perf_counter()
        request = protocol.decode_predict_request(frame)
        image_codec.decode_images(policy.info.inputs, request.observation, request.images)
        decode.append(time.perf_counter() - start)
    server, port = start_server(policy, "127.0.0.1", 0)
    round_trip = []
    try:
        with PolicyClient(f"grpc://127.0.0.1:{port}", timeout_s=10.0, image_encoding=encoding) as client:
            for _ in range(10):
                client.predict(observation, 0, "pick the cube")
            for i in range(calls):
                start = time.perf_counter()
                client.predict(observation, i, "pick the cube")
                round_trip.append(time.perf_counter() - start)
    finally:
        server.stop(0)
    return {
        "cameras": cameras,
        "image_encoding": encoding,
        "request_bytes": len(frame),
        "encode": percentiles(encode),
        "decode": percentiles(decode),
        "round_trip": percentiles(round_trip),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "policy_server.json")
    args = parser.parse_args()
    rows = [measure(cameras, args.calls) for cameras in (0, 1, 2)]
    rows += [measure(1, args.calls, encoding) for encoding in ("jpeg", "png")]
    for row in rows:
        rt, enc, dec = row["round_trip"], row["encode"], row["decode"]
        print(
            f"{row['cameras']} cameras {row['image_encoding']}: {row['request_bytes']} B, encode p50 {enc['p50_ms']} "
            f"ms, decode p50 {dec['p50_ms']} ms, round trip p50 {rt['p50_ms']} / p90 {rt['p90_ms']} ms"
        )
    result = {
        "bench": "policy_server_loopback",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_1min": os.getloadavg()[0]},
        "calls": args.calls,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
