"""The robot's side of a policy server link without a ROS graph: the cores the policy node and the executor run.

`RemotePolicy` (what the node runs for checkpoint:=grpc://...) predicts on a fresh 320x240-like camera image and
state; the node's `InferenceScheduler` decides when each inference starts (`threshold` 0, `--margin`); every chunk
goes to a `ChunkExecutor` ticked at 50 Hz, whose starvation time (what the executor node reports as
`starvation_s`) is measured over `--duration` s from the first chunk. The node's `advise` names the bottleneck.
Prints one JSON line.

Usage: python link_client.py --url grpc://HOST:PORT --encoding raw|jpeg|png [--duration 4] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policy_server"))
from fake_policy_server import camera_like_image

from lerobot_contract.time import NS
from lerobot_policy_node.core.bottleneck import advise
from lerobot_policy_node.core.errors import ChunkRejected
from lerobot_policy_node.core.executor import Chunk, ChunkExecutor, ExecutorConfig
from lerobot_policy_node.core.policies import RemotePolicy
from lerobot_policy_node.core.scheduling import InferenceScheduler, SchedulerConfig

TICK_S = 0.02


def run(url: str, encoding: str, quality: int, duration_s: float, workers: int, margin_s: float) -> dict:
    policy = RemotePolicy(url, timeout_s=10.0, image_encoding=encoding, jpeg_quality=quality)
    camera = next(f for f in policy.inputs if f.visual)
    image = camera_like_image(camera.shape[0], camera.shape[1])
    period_ns = round(NS / (policy.fps or 30.0))
    chunk_s = policy.horizon * period_ns / NS
    scheduler = InferenceScheduler(SchedulerConfig(threshold=0.0, margin_s=margin_s, max_observation_age_s=1.0))
    executor = ChunkExecutor(ExecutorConfig(joint_names=tuple(f"j{i}" for i in range(policy.action_dim))))
    executor.reset(np.zeros(policy.action_dim), time.monotonic_ns())
    lock = threading.Lock()
    first_chunk_ns: list[int] = []
    errors: list[str] = []  # failed Predict calls
    rejected: list[str] = []  # chunks the executor refused (one that ends before it arrives: too late)

    def infer(observation_ns: int) -> None:
        start = time.perf_counter()
        try:
            actions = policy.predict_chunk(
                {"observation.state": np.zeros(policy.action_dim), camera.key: image, "timestamp": observation_ns / NS}
            )
        except Exception as err:  # reported in the JSON; the loop goes on as the node's does
            errors.append(f"{type(err).__name__}: {err}")
            with lock:
                scheduler.inference_finished(observation_ns, time.perf_counter() - start, False)
            return
        now = time.monotonic_ns()
        with lock:
            scheduler.inference_finished(observation_ns, time.perf_counter() - start, True)
            try:
                executor.submit(
                    Chunk(observation_ns, period_ns, actions, len(rejected) + executor.stats.chunks_accepted + 1), now
                )
            except ChunkRejected as err:
                rejected.append(str(err))
            if not first_chunk_ns:
                first_chunk_ns.append(now)

    # Warm-up, as the node's: one call measured, not given to the executor.
    start = time.perf_counter()
    policy.predict_chunk({"observation.state": np.zeros(policy.action_dim), camera.key: image, "timestamp": 0.0})
    scheduler.record_inference(time.perf_counter() - start)
    pool = ThreadPoolExecutor(max_workers=workers)
    deadline = None
    while deadline is None or time.monotonic_ns() < deadline:
        now = time.monotonic_ns()
        with lock:
            executor.target(now)
            if deadline is None and first_chunk_ns:
                deadline = first_chunk_ns[0] + round(duration_s * NS)
            if scheduler.should_start(now, workers):
                scheduler.inference_started(now, period_ns, policy.horizon)
                pool.submit(infer, now)
        time.sleep(TICK_S)
    end = time.monotonic_ns()
    with lock:
        starvation = executor.starvation_s(end)
        expected = scheduler.expected_inference_s + margin_s
    pool.shutdown(wait=True)
    figures = policy.link.figures()
    advice = advise(expected, chunk_s, workers, figures, image_encoding=encoding, jpeg_quality=quality, has_images=True)
    policy.close()
    window = (end - first_chunk_ns[0]) / NS
    return {
        "encoding": encoding,
        "window_s": window,
        "starvation_s": starvation,
        "starvation_fraction": starvation / window,
        "chunks": executor.stats.chunks_accepted,
        "chunk_s": chunk_s,
        "expected_inference_s": expected,
        "request_bytes": figures.request_bytes if figures else None,
        "transfer_s": figures.transfer_s if figures else None,
        "link_mbit_s": figures.mbit_s if figures else None,
        "server_inference_s": figures.server_inference_s if figures else None,
        "encode_s": figures.encode_s if figures else None,
        "bottleneck": advice.bottleneck.value,
        "advice": advice.message,
        "chunks_rejected": len(rejected),
        "rejections": rejected[:3],
        "errors": errors[:5],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--encoding", default="raw", choices=("raw", "jpeg", "png"))
    parser.add_argument("--jpeg-quality", type=int, default=90)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--margin", type=float, default=0.15, help="the node's `margin` (s): slack for CPU stalls")
    args = parser.parse_args()
    result = run(args.url, args.encoding, args.jpeg_quality, args.duration, args.workers, args.margin)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
