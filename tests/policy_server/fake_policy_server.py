"""A policy server with a numpy-only policy, for tests that need a server process they can kill.

Usage: python fake_policy_server.py --port P [--action-dim 6] [--fault none|dim|fail] [--horizon 15] [--fps 30]
       [--camera HxW]

The policy holds the observed state (``observation.state``, float32 (action_dim,)) plus a slow sine on the
first joint, so a robot driven by it moves a little around where it is. With ``--camera HxW`` it also takes
``observation.images.front`` ((H, W, 3) uint8) and adds the image's mean (0..1) to the second joint.
``dim`` answers one action column too many, ``fail`` raises in every inference. Prints ``serving on PORT``
once it listens.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from lerobot_policy_server.protocol import FeatureSpec, PolicyInfo
from lerobot_policy_server.security import ServerSecurity, read_token
from lerobot_policy_server.service import serve_forever, start_server

CAMERA_KEY = "observation.images.front"


def camera_like_image(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A picture with what JPEG meets in a camera's: smooth shading, hard-edged objects, sensor noise (sigma 3)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.stack([80 + 100 * x / width, 60 + 120 * y / height, 140 - 60 * (x + y) / (width + height)], axis=-1)
    for _ in range(6):
        cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(0.04, 0.2) * width
        image[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.uniform(0, 255, size=3)
    image += rng.normal(0, 3, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


class SinePolicy:
    def __init__(
        self, action_dim: int, horizon: int, fps: float, fault: str, camera: tuple[int, int] | None = None
    ) -> None:
        self.fault = fault
        self.fps = fps
        self.tasks: list[str] = []
        self.info = PolicyInfo(
            policy_type="fake_sine",
            name="fake_sine",
            backend="test",
            device="cpu",
            inputs=(FeatureSpec("observation.state", (action_dim,), "float32", False),)
            + ((FeatureSpec(CAMERA_KEY, (*camera, 3), "uint8", True),) if camera else ()),
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
        if CAMERA_KEY in observation:
            chunk[:, 1] += float(np.mean(observation[CAMERA_KEY])) / 255.0
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
    parser.add_argument("--camera", default="", help="HxW: also take a camera image of this size")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--token-file", default="", help="callers must send the token this file holds")
    parser.add_argument("--front", action="store_true", help="behind the connection front, on loopback too")
    args = parser.parse_args()
    camera = tuple(int(n) for n in args.camera.split("x")) if args.camera else None
    policy = SinePolicy(args.action_dim, args.horizon, args.fps, args.fault, camera)  # type: ignore[arg-type]
    security = ServerSecurity(read_token(args.token_file)) if args.token_file else ServerSecurity(insecure=True)
    server, port = start_server(policy, args.host, args.port, security, front=True if args.front else None)
    print(f"serving on {port}", flush=True)
    serve_forever(server, grace_s=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
