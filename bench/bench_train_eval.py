"""Episodes per minute of the trainer's periodic evaluation (`lerobot-ros train --eval-every`) against
`--eval-num-envs N`, on this machine.

The policy is an ACT of the demo's size and inputs (random weights: every episode runs to `--max-steps`, equal
lengths, throughput only; `bench_parallel_eval.demo_sized_act`), the env the trainer's default: the SO-101 sim in
process (`contract_sim_env`, no camera since the policy uses none). N=1 is the serial `evaluate` in this process
(what `--eval-num-envs 1` runs); N>1 is `evaluate_vector` on N spawned workers, worker start-up included (the
trainer starts them once, at its first evaluation, and keeps them). Every run's per-episode outcomes (seed,
success, return, steps) must equal the serial run's: the bench fails if not. The load average before and after
is recorded (the machine is shared).

Usage: python bench/bench_train_eval.py [--envs 1,2,4] [--episodes 6] [--max-steps 150]
Results: bench/results/train_eval.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

# Nothing heavy at module level: the env workers are spawned, and a spawned process imports the main module.
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CONTRACT = ROOT / "config" / "contracts" / "so101_sim.yaml"
STATE, ENV_STATE = "observation.state", "observation.environment_state"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="1,2,4", help="numbers of envs to measure (comma-separated; 1 = serial)")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--max-steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=3000)
    args = parser.parse_args()

    from bench_parallel_eval import demo_sized_act

    from lerobot_ros.vector_env import episodes_per_minute, make_vector_env
    from lerobot_sim_bridge.contract_env import contract_sim_env
    from lerobot_training.checkpoint import load_policy
    from lerobot_training.evaluation import evaluate, evaluate_vector

    with tempfile.TemporaryDirectory() as scratch:
        policy = load_policy(demo_sized_act(Path(scratch) / "pretrained_model")).policy
    factory = functools.partial(contract_sim_env, contract=str(CONTRACT), features=[STATE, ENV_STATE])
    runs: list[dict[str, Any]] = []
    reference = None
    for count in [int(n) for n in args.envs.split(",") if n.strip()]:
        load_before = os.getloadavg()
        started = time.perf_counter()
        if count == 1:
            result = evaluate(policy, factory(), args.episodes, args.max_steps, args.seed)
        else:
            envs = make_vector_env(count, factory)
            try:
                result = evaluate_vector(policy, envs, args.episodes, args.max_steps, args.seed)
            finally:
                envs.close()
        wall = time.perf_counter() - started
        reference = reference or result.per_episode
        if result.per_episode != reference:
            raise SystemExit(f"{count} envs: per-episode outcomes differ from the first run's")
        runs.append({
            "envs": count, "episodes": result.episodes, "wall_s": round(wall, 2),
            "episodes_per_minute": round(episodes_per_minute(result.episodes, wall), 2),
            "load_before": [round(x, 1) for x in load_before], "load_after": [round(x, 1) for x in os.getloadavg()],
        })  # fmt: skip
        print(json.dumps(runs[-1]), flush=True)
    base = runs[0]["episodes_per_minute"] if runs else 0.0
    for run in runs:
        run["ratio_to_first"] = round(run["episodes_per_minute"] / base, 2) if base else 0.0
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "bench": "train_eval", "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cores": os.cpu_count(), "platform": platform.platform()},
        "settings": {"episodes": args.episodes, "max_steps": args.max_steps, "seed": args.seed},
        "same_outcomes_as_serial": True, "runs": runs,
    }  # fmt: skip
    (RESULTS / "train_eval.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"results: {RESULTS / 'train_eval.json'}")


if __name__ == "__main__":
    main()
