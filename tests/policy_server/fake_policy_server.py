"""A policy server with a numpy-only policy, for tests that need a server process they can kill.

Usage: python fake_policy_server.py --port P [--action-dim 6] [--fault none|dim|fail] [--horizon 15] [--fps 30]

The policy holds the observed state (``observation.state``, float32 (action_dim,)) plus a slow sine on the
first joint, so a robot driven by it moves a little around where it is. ``dim`` answers one action column
too many, ``fail`` raises in every inference. Prints ``serving on PORT`` once it listens.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from lerobot_policy_server.protocol import FeatureSpec, PolicyInfo
from lerobot_policy_server.service import serve_forever, start_server


class SinePolicy:
    def __init__(self, action_dim: int, horizon: int, fps: float, fault: str) -> None:
        self.fault = fault
        self.fps = fps
        self.tasks: list[str] = []
        self.info = PolicyInfo(
            policy_type="fake_sine",
            name="fake_sine",
            backend="test",
            device="cpu",
            inputs=(FeatureSpec("observation.state", (action_dim,), "float32", False),),
            action_dim=action_dim,
            horizon=horizon,
            fps=fps,
            language=True,
        )
        self.calls = 0

    def reset(self) -> None:
        self.calls = 0

    def predict(self, observation: Mapping[str, Any], task: str) -> np.ndarray:
        if self.fault == "fail":
            raise RuntimeError("the fake policy fails on purpose")
        self.calls += 1
        state = np.asarray(observation["observation.state"], dtype=np.float64)
        steps = np.arange(self.info.horizon) / self.fps
        chunk = np.repeat(state[None, :], self.info.horizon, axis=0)
        chunk[:, 0] += 3.0 * np.sin(2 * math.pi * 0.5 * steps)
        if self.fault == "dim":
            chunk = np.concatenate((chunk, np.zeros((self.info.horizon, 1))), axis=1)
        return chunk.astype(np.float32)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--action-dim", type=int, default=6)
    parser.add_argument("--horizon", type=int, default=15)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--fault", default="none", choices=("none", "dim", "fail"))
    args = parser.parse_args()
    server, port = start_server(SinePolicy(args.action_dim, args.horizon, args.fps, args.fault), "127.0.0.1", args.port)
    print(f"serving on {port}", flush=True)
    serve_forever(server, grace_s=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
