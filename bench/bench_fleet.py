"""Fleet bag conversion on datatrove (`bag2dataset --executor local`): bags/hour with 1 and 2 workers, and the
projected cost of 10,000 bags of 60 s.

Synthetic bags (lerobot_bags.synthetic) as in bench_bag2dataset.py: 2 cameras 640x480 @ 30 fps
(Image rgb8 with sensor noise) and JointState @ 100 Hz, mcap; encoder h264-ultrafast (the CLI default). Each
run is the CLI in its own process (`--tasks` = bag count, `--workers` 1 or 2) into a fresh output, shards
merged at the end, so a run's wall time covers conversion, datatrove's bookkeeping and the merge. The 1-worker
run is the same-run baseline of the 2-worker figure. The load average before and after each run is recorded
(the machine is shared).

CPU time counts every process of a run (this process is a child subreaper, so datatrove's forkserver, pool
workers and manager are reaped here and their CPU counted).

Projection (stated as such, not measured): a bag of 60 s costs (1-worker CPU s per bag) x 60 / (bag length)
core-seconds; 10,000 of them is that x 10,000; W workers with a core each divide the wall time by W (on an
idle machine with free cores; this shared 2-core machine does not show that scaling). The merge's
share (stream copies, no decoding) is measured separately and scaled by frames.

Usage: python bench/bench_fleet.py [--bags N] [--duration S] [--keep]
Results: bench/results/fleet.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from headline import figure

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FLEET_BAGS, FLEET_BAG_S = 10_000, 60.0


def _make_bags(workdir: Path, count: int, duration: float) -> tuple[list[Path], Path]:
    from lerobot_bags.synthetic import SyntheticBagSpec, contract_for, write_synthetic_bag

    spec = SyntheticBagSpec(duration_s=duration, noise=3.0)
    bags = []
    for i in range(count):
        path = workdir / f"bag{i:03d}"
        write_synthetic_bag(path, SyntheticBagSpec(**{**spec.__dict__, "seed": i}))
        bags.append(path)
    contract = workdir / "contract.yaml"
    contract.write_text(yaml.safe_dump(contract_for(spec, camera_dtype="video").to_dict()))
    return bags, contract


def _become_subreaper() -> None:
    """Orphans of a run (datatrove's forkserver and manager outlive the CLI briefly) are reparented to this
    process, so their CPU time is counted when they are reaped (`_reap`)."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _reap(wait_s: float = 10.0) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _run(bags: list[Path], contract: Path, output: Path, workers: int) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "lerobot_ros.cli",
        "bag2dataset",
        *map(str, bags),
        *("--contract", str(contract), "--output", str(output), "--task", "pick", "--quiet"),
        *("--executor", "local", "--tasks", str(len(bags)), "--workers", str(workers)),
    ]
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    _reap()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"run with {workers} worker(s) failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    info = json.loads((output / "meta" / "info.json").read_text())
    merge_line = [line for line in proc.stdout.splitlines() if "merged into" in line]
    return {
        "workers": workers,
        "bags": len(bags),
        "episodes": info["total_episodes"],
        "frames": info["total_frames"],
        "wall_s": round(wall, 2),
        "bags_per_hour": round(len(bags) / wall * 3600, 1),
        "cpu_s": round(cpu, 2),
        "cpu_s_per_bag": round(cpu / len(bags), 2),
        "cores_busy": round(cpu / wall, 2),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "summary": merge_line[-1].strip() if merge_line else None,
    }


def _merge_share(output: Path, workdir: Path) -> dict[str, Any]:
    """Time of merging the converted dataset again (one source: what the final step costs per frame)."""
    from lerobot_dataset.merge import merge_datasets

    started = time.monotonic()
    report = merge_datasets([output], workdir / "remerged")
    wall = time.monotonic() - started
    return {"frames": report.frames, "wall_s": round(wall, 3), "ms_per_frame": round(wall / report.frames * 1e3, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bags", type=int, default=4)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per bag")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    _become_subreaper()
    workdir = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        bags, contract = _make_bags(workdir, args.bags, args.duration)
        runs = [_run(bags, contract, workdir / f"out-{workers}", workers) for workers in (1, 2)]
        merge = _merge_share(workdir / "out-1", workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    one, two = runs
    scale = FLEET_BAG_S / args.duration * FLEET_BAGS / 3600
    core_hours = one["cpu_s_per_bag"] * scale
    projection = {
        "what": (
            f"projection, not measured: {FLEET_BAGS} bags of {FLEET_BAG_S:.0f} s at the measured 1-worker CPU cost "
            f"per bag ({one['cpu_s_per_bag']:.2f} CPU s per {args.duration:.0f} s bag, every process of the run, "
            "scaled by length); wall hours assume each worker has a core of its own"
        ),
        "core_hours": round(core_hours, 1),
        "wall_hours_by_workers": {str(w): round(core_hours / w, 1) for w in (1, 2, 16, 64, 256)},
        "wall_hours_this_machine_1_worker": round(one["wall_s"] / one["bags"] * scale, 1),
        "merge_hours": round(merge["ms_per_frame"] * FLEET_BAGS * FLEET_BAG_S * 30 / 1e3 / 3600, 2),
    }
    result = {
        "machine": {"cpus": os.cpu_count()},
        "bag": {"duration_s": args.duration, "cameras": "2 x 640x480 rgb8 @ 30 fps", "joints": "100 Hz"},
        "runs": runs,
        "merge_share": merge,
        "speedup_2_workers": round(one["wall_s"] / two["wall_s"], 2),
        "projection_10000_bags_60s": projection,
        "headline": [
            figure("bags/hour, 1 worker", one["bags_per_hour"], "bags/h"),
            figure(
                "bags/hour, 2 workers",
                two["bags_per_hour"],
                "bags/h",
                baseline=one["bags_per_hour"],
                baseline_what="1 worker, same run, same bags",
            ),
            figure("projected core-hours for 10,000 bags of 60 s", projection["core_hours"], "core-h"),
        ],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fleet.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
