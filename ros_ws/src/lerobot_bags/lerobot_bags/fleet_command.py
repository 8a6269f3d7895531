"""The fleet options of `lerobot-ros bag2dataset` (--executor local|slurm): see bags/fleet.py."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from lerobot_ros.command import CommandError

if TYPE_CHECKING:
    from lerobot_bags.convert import ConvertOptions


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The --executor options (added to bag2dataset's parser)."""
    group = parser.add_argument_group(
        "fleet conversion (datatrove)",
        "--executor converts the bags (sorted by path) in --tasks shards, --workers at a time, each into a shard "
        "dataset, then merges the shards into ROOT; a re-run of the same command runs only unfinished tasks",
    )
    group.add_argument("--executor", choices=("local", "slurm"), default=None, help="run as a datatrove pipeline")
    group.add_argument("--tasks", type=int, default=None, metavar="T", help="shards (default: one per bag, <= 1000)")
    group.add_argument(
        "--workers", type=int, default=None, metavar="W", help="tasks at a time (local default: CPU count)"
    )
    group.add_argument(
        "--logging-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="datatrove logs, completions and the shard datasets (default: ROOT.shards next to ROOT; with slurm, "
        "on storage every node sees)",
    )
    group.add_argument("--keep-shards", action="store_true", help="keep the shard datasets after the merge")
    group.add_argument("--slurm-partition", default=None, metavar="NAME", help="slurm: partition (required)")
    group.add_argument("--slurm-time", default="04:00:00", metavar="HH:MM:SS", help="slurm: time limit per task")
    group.add_argument("--slurm-cpus-per-task", type=int, default=1, metavar="N", help="slurm: CPUs per task")
    group.add_argument("--slurm-mem-per-cpu-gb", type=int, default=4, metavar="GB", help="slurm: memory per CPU")
    group.add_argument(
        "--slurm-venv", default=None, metavar="ACTIVATE", help="slurm: venv activate script (default: this venv's)"
    )
    group.add_argument(
        "--slurm-print-script", action="store_true", help="slurm: print the sbatch scripts instead of submitting"
    )


def fleet_requested(args: argparse.Namespace) -> bool:
    """True when bag2dataset runs as a fleet; refuses options that only apply to one kind of run."""
    fleet_only = [
        name
        for name, value in (
            ("--tasks", args.tasks),
            ("--workers", args.workers),
            ("--logging-dir", args.logging_dir),
            ("--keep-shards", args.keep_shards or None),
            ("--slurm-partition", args.slurm_partition),
        )
        if value is not None
    ]
    if args.executor is None:
        if fleet_only:
            raise CommandError(f"{', '.join(fleet_only)} only apply with --executor local|slurm")
        return False
    for name, value in (("--append", args.append), ("--allow-duplicates", args.allow_duplicates)):
        if value:
            raise CommandError(f"{name} does not apply with --executor (the shards are merged into a new ROOT)")
    if args.jobs != 1 or args.exact_jobs:
        option = "--jobs" if args.jobs != 1 else "--exact-jobs"
        raise CommandError(f"{option} does not apply with --executor; --workers sets how many tasks run at a time")
    if args.tasks is not None and not 1 <= args.tasks <= 100_000:
        raise CommandError(f"--tasks {args.tasks}: give 1..100000 tasks")
    if args.workers is not None and not 1 <= args.workers <= 4096:
        raise CommandError(f"--workers {args.workers}: give 1..4096 tasks at a time")
    if args.executor == "slurm":
        if not args.slurm_partition:
            raise CommandError("--executor slurm needs --slurm-partition NAME")
        if args.push_to_hub:
            raise CommandError("--push-to-hub does not apply with --executor slurm (push ROOT after the merge job)")
    return True


def run_fleet(args: argparse.Namespace, options: ConvertOptions, repo_id: str) -> int:
    """bag2dataset --executor: run (local) or submit (slurm) the fleet conversion."""
    from lerobot_bags.errors import BagError
    from lerobot_bags.fleet import (
        FleetJob,
        SlurmSettings,
        run_local,
        slurm_executors,
        slurm_script,
        submit_slurm,
    )

    tasks = args.tasks or min(len(args.bags), 1000)
    try:
        job = FleetJob.create(
            args.bags,
            options,
            args.output,
            tasks=tasks,
            repo_id=repo_id,
            codec=args.codec,
            logging_dir=args.logging_dir,
            keep_shards=args.keep_shards,
        )
    except BagError as err:
        raise CommandError(str(err)) from None
    if args.executor == "slurm":
        try:
            slurm = SlurmSettings(
                partition=args.slurm_partition,
                time=args.slurm_time,
                cpus_per_task=args.slurm_cpus_per_task,
                mem_per_cpu_gb=args.slurm_mem_per_cpu_gb,
                workers=args.workers or -1,
                venv_activate=args.slurm_venv,
            )
        except ValueError as err:
            raise CommandError(str(err)) from None
        if args.slurm_print_script:
            convert, merge = slurm_executors(job, slurm)
            print(f"# conversion: {tasks} task(s)\n{slurm_script(convert)}\n# merge (after every task succeeded)")
            print(slurm_script(merge))
            return 0
        try:
            convert_id, merge_id = submit_slurm(job, slurm)
        except BagError as err:
            raise CommandError(str(err)) from None
        print(f"bag2dataset: submitted conversion job {convert_id} ({tasks} tasks) and merge job {merge_id}")
        print(f"bag2dataset: logs and completions in {job.logging_dir}; repeat this command to resume failed tasks")
        return 0
    workers = args.workers or min(tasks, os.cpu_count() or 1)
    print(
        f"bag2dataset: {len(job.bags)} bag(s) in {tasks} task(s), {workers} at a time -> {job.output} "
        f"(datatrove logs and completions: {job.logging_dir})",
        flush=True,
    )
    try:
        result = run_local(job, workers, on_status=lambda line: print(f"bag2dataset: {line}", flush=True))
    except BagError as err:
        raise CommandError(str(err)) from None
    failed_bags = 0
    for shard in result.shards:
        for failure in shard.get("failed", []):
            failed_bags += 1
            print(f"  FAILED   {failure['bag']}: {failure['error']}")
        for skipped in shard.get("skipped", []):
            print(f"  skipped  {skipped.get('bag')}: {skipped.get('skipped')}")
    if result.already_merged:
        print(f"bag2dataset: {job.output} was merged before; nothing left to convert")
        return 0
    for rank, why in sorted(result.failed.items()):
        print(f"  task {rank} FAILED ({len(job.shard(rank))} bag(s)): {why}")
    if result.failed:
        print(
            f"bag2dataset: {len(result.failed)} of {tasks} task(s) did not complete (task logs: "
            f"{job.logging_dir / 'logs'}); the others did. Nothing was merged: run the same command again to "
            "resume the unfinished tasks and merge",
            flush=True,
        )
        return 1
    assert result.merged is not None
    print(
        f"bag2dataset: {result.merged['episodes']} episode(s), {result.merged['frames']} frames from "
        f"{result.merged['shards']} shard(s) merged into {job.output} in {result.seconds:.1f} s"
        + (f"; {failed_bags} bag(s) failed" if failed_bags else "")
    )
    if args.push_to_hub:
        from lerobot_dataset.hub import HubError, push_dataset

        try:
            url = push_dataset(job.output, args.push_to_hub, private=args.private)
        except HubError as err:
            raise CommandError(str(err)) from None
        print(f"pushed to {url}")
    return 1 if failed_bags else 0
