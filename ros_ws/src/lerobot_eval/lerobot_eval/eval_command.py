"""`lerobot-ros eval`: a policy against the sim bridge for N episodes: success rate, returns, chunk statistics, videos.

The bridge runs in lockstep (it advances one control step per command) and the policy's chunks go through the
same `ChunkExecutor` the executor node uses, on the simulation's step clock: a new chunk is computed when the
fraction of the current one left falls to `--threshold`, stamped with its observation's step and blended in
with `--blend`. Inference takes no simulated time in lockstep, so this measures the policy and the chunk
handling, not the real-time behaviour (that is the executor node's and bench/bench_policy_executor.py's job).

With `--num-envs N` (or `--num-envs` alone: one env per core) the episodes run N at a time on an in-process
vector env instead of the bridge (lerobot_eval.vector_evaluation): same controller, contract conversion,
chunk handling and per-seed outcomes, more episodes per minute (1.7x with 2 envs on 2 cores, README).
With `--num-envs N --through-ros` they run through the real nodes instead (lerobot_eval.ros_evaluation): N sim
bridges in real time in namespaces /robot_0.., N action executors, and one policy node serving all N robots
(its `robots` parameter) that runs the inferences due together as one batch.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from lerobot_ros.command import Command, CommandError


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="checkpoint directory, Hub repo id, or scripted[:options]")
    parser.add_argument("--contract", default="", help="contract YAML (default: the checkpoint's, else so101_sim)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    parser.add_argument("--max-steps", type=int, default=300, help="control steps per episode at most (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode (episode i gets seed + i)")
    parser.add_argument("--env-id", default="so101_pick_place", help="simulation (default so101_pick_place)")
    parser.add_argument("--cameras", default="front:320x240", help="bridge cameras, name:WIDTHxHEIGHT comma-separated")
    parser.add_argument("--videos", type=int, default=2, help="episodes saved as MP4 (default 2)")
    parser.add_argument("--blend", default="crossfade", choices=("replace", "crossfade", "ensemble"))
    parser.add_argument("--threshold", type=float, default=0.5, help="re-plan when this fraction of the chunk is left")
    parser.add_argument("--device", default="cpu", help="torch device of the policy")
    parser.add_argument("--output-dir", type=Path, default=None, help="where eval.json and videos go")
    parser.add_argument("--no-bridge", action="store_true", help="use a running bridge (mode:=lockstep) instead")
    parser.add_argument("--step-timeout", type=float, default=30.0, help="seconds to wait for each observation")
    parser.add_argument(
        "--num-envs", nargs="?", const="auto", default=None, metavar="N",
        help="run N episodes at once on in-process simulations (no ROS); alone or 'auto': one per core",
    )  # fmt: skip
    parser.add_argument(
        "--through-ros", action="store_true",
        help="with --num-envs N: N sim bridges (real time, namespaces /robot_0..) driven by N action executors and "
        "one policy node batching their observations, instead of in-process simulations",
    )  # fmt: skip


def _run(args: argparse.Namespace) -> int:
    if args.episodes < 1 or args.max_steps < 1:
        raise CommandError("--episodes and --max-steps must be >= 1")
    if not 0.0 <= args.threshold < 1.0:
        raise CommandError(f"--threshold must be in [0, 1), got {args.threshold}")
    output_dir = args.output_dir or Path("outputs") / "eval" / time.strftime("%Y%m%d_%H%M%S")
    output_dir.mkdir(parents=True, exist_ok=True)
    from lerobot_eval.evaluation import EvalSettings, run_evaluation

    settings = EvalSettings(
        checkpoint=args.checkpoint,
        contract=args.contract,
        episodes=args.episodes,
        max_steps=args.max_steps,
        seed=args.seed,
        env_id=args.env_id,
        cameras=args.cameras,
        videos=args.videos,
        blend=args.blend,
        threshold=args.threshold,
        device=args.device,
        output_dir=output_dir,
        start_bridge=not args.no_bridge,
        step_timeout=args.step_timeout,
        num_envs=args.num_envs,
        through_ros=args.through_ros,
    )
    report: dict[str, Any] = run_evaluation(settings, progress=print)
    (output_dir / "eval.json").write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"success rate {report['success_rate']:.2f} ({report['successes']}/{report['episodes']}), mean return "
        f"{report['mean_return']:.3f}, chunks {report['chunks']['accepted']}, largest step at a chunk boundary "
        f"{report['chunks']['max_boundary_step']:.4g} vs inside {report['chunks']['max_inner_step']:.4g}"
    )
    if "episodes_per_minute" in report:
        print(f"{report['num_envs']} envs: {report['episodes_per_minute']:.1f} episodes per minute")
    print(f"report: {output_dir / 'eval.json'}; videos: {', '.join(report['videos']) or 'none'}")
    return 0


COMMAND = Command(
    name="eval",
    help="run a policy against the sim bridge: success rate, returns, chunk statistics, videos",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
