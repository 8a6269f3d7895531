"""`lerobot-ros bag2dataset` and `lerobot-ros dataset2bag`: rosbag2 bags <-> LeRobot v3 datasets.

lerobot-ros bag2dataset BAG... --contract FILE --output ROOT [--task TEXT | --task-topic T]
lerobot-ros bag2dataset BAG... --contract FILE --output ROOT --executor local|slurm --tasks T --workers W
lerobot-ros dataset2bag ROOT --contract FILE --output BAG [--episodes 0 2 5]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from lerobot_ros.command import Command, CommandError


def _add_bag2dataset(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bags", nargs="+", type=Path, metavar="BAG", help="rosbag2 folders (or .mcap/.db3 files)")
    parser.add_argument("--contract", type=Path, required=True, help="robot contract YAML (config/contracts/)")
    parser.add_argument("--output", type=Path, required=True, metavar="ROOT", help="dataset folder to write")
    parser.add_argument("--repo-id", default=None, help="dataset repo id stored in the card (default: local/<ROOT>)")
    task = parser.add_mutually_exclusive_group()
    task.add_argument("--task", default=None, help="task text of every episode")
    task.add_argument("--task-topic", default=None, metavar="TOPIC", help="std_msgs/String topic giving the task")
    parser.add_argument(
        "--split",
        default="one-per-bag",
        help="one-per-bag (default), marker:TOPIC (each message starts an episode) or gap:SECONDS",
    )
    parser.add_argument(
        "--stamp", choices=("header", "receive"), default=None, help="clock that places messages (default: contract)"
    )
    parser.add_argument("--align", choices=("hold", "nearest", "linear"), default="hold", help="resampling rule")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=None,
        metavar="S",
        help="max spread of one frame's samples (s; positive and finite)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="bags converted in parallel (processes): at most N, and no more than the cores idle at the start "
        "(a line says when fewer run)",
    )
    parser.add_argument(
        "--exact-jobs", action="store_true", help="run --jobs N worker processes even when fewer cores are idle"
    )
    parser.add_argument(
        "--codec",
        default=None,
        metavar="NAME",
        help="video encoder settings: h264-ultrafast (default; libx264 preset ultrafast, crf 30, g 2: ~11 CPU ms "
        "per frame of 2 cameras 640x480 in all, the only setting cheap enough for 4x real time on 2 cores, "
        "measured in bench/bench_bag2dataset.py), libsvtav1 (LeRobot's AV1 settings: ~52 ms per frame, best "
        "quality per byte on clean frames) or h264 (LeRobot's libx264 settings: ~25 ms). With --append: the "
        "default if the dataset holds h264 video, else LeRobot's setting of the dataset's codec",
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="add episodes to an existing dataset at ROOT (refuses a bag it already holds). Without --append, an "
        "existing ROOT is resumed when this same command made it: only what it lacks is converted",
    )
    parser.add_argument(
        "--allow-type-change",
        action="store_true",
        help="convert a contract topic that also carries messages of another type (a type change mid-bag): its "
        "messages of the contract's type are converted, the others skipped, counted and reported (default: refuse "
        "the bag)",
    )
    parser.add_argument(
        "--allow-duplicates", action="store_true", help="convert bags that ROOT (or this command) already holds again"
    )
    parser.add_argument("--push-to-hub", default=None, metavar="REPO", help="upload the dataset to this Hub repo")
    parser.add_argument("--private", action="store_true", help="with --push-to-hub: create the repo private")
    parser.add_argument(
        "--quiet",
        "--no-progress",
        dest="quiet",
        action="store_true",
        help="no progress (on a terminal a bar, elsewhere a line per 10 s; LEROBOT_ROS_NO_PROGRESS=1 also)",
    )
    from lerobot_bags.fleet_command import add_fleet_arguments

    add_fleet_arguments(parser)


def _episode_line(entry: dict[str, Any]) -> str:
    if "skipped" in entry:
        return f"  skipped  {entry['bag']}: {entry['skipped']}"
    skews = ", ".join(f"{k} {v['max_skew_s'] * 1000:.1f}" for k, v in entry["features"].items())
    # Per camera: frames that repeat the previous frame's image / images no frame shows (the grid phase's effect).
    images = ", ".join(
        f"{k.rsplit('.', 1)[-1]} {v['reused']}/{v['unused']}" for k, v in entry.get("images", {}).items()
    )
    return (
        f"  episode {entry['episode_index']:>4}  {entry['frames']:>6} frames  dropped {entry['frames_dropped']:>4} "
        f"(stale {entry['frames_dropped_stale']}, tolerance {entry['frames_dropped_tolerance']})  "
        f"coverage {entry['coverage'] * 100:5.1f}%  max skew ms: {skews}  "
        + (f"images reused/never used: {images}  " if images else "")
        + f"[{Path(entry['bag']).name}]"
    )


def _run_bag2dataset(args: argparse.Namespace) -> int:

    from lerobot_bags.convert import ConvertOptions, SplitRule
    from lerobot_bags.errors import BagError, DiskFullError
    from lerobot_bags.pipeline import check_output, convert_bags
    from lerobot_contract import ContractError, load_contract

    missing = [str(bag) for bag in args.bags if not bag.exists()]
    if missing:
        raise CommandError(f"bag(s) not found: {', '.join(missing)}")
    if args.tolerance is not None and not 0 < args.tolerance < 1e6:
        raise CommandError(f"--tolerance {args.tolerance}: give a positive, finite number of seconds (e.g. 0.05)")
    if not 1 <= args.jobs <= 256:
        raise CommandError(f"--jobs {args.jobs}: give 1..256 worker processes")
    for option, repo in (("--repo-id", args.repo_id), ("--push-to-hub", args.push_to_hub)):
        # Checked now, not after a long conversion.
        if repo is not None and (repo.count("/") != 1 or not all(repo.split("/"))):
            raise CommandError(f"{option} {repo!r} must look like 'user_or_org/name'")
    if args.private and not args.push_to_hub:
        raise CommandError("--private only applies with --push-to-hub REPO")
    try:
        contract = load_contract(args.contract)
        split = SplitRule.parse(args.split)
        check_output(args.output)
    except (ContractError, ValueError, BagError) as err:
        raise CommandError(str(err)) from None
    from lerobot_dataset.video import VIDEO_ENCODINGS

    if args.codec is not None and args.codec not in VIDEO_ENCODINGS:
        raise CommandError(f"--codec {args.codec!r} is not one of {', '.join(VIDEO_ENCODINGS)}")
    if not args.task and not args.task_topic and split.kind != "marker":
        raise CommandError("every episode needs a task: pass --task TEXT or --task-topic TOPIC")
    try:
        options = ConvertOptions(
            contract=contract,
            stamp=args.stamp or contract.stamp,
            align=args.align,
            tolerance_s=args.tolerance if args.tolerance is not None else contract.sync_tolerance_s,
            task=args.task,
            task_topic=args.task_topic,
            split=split,
            allow_type_change=args.allow_type_change,
        )
    except ValueError as err:
        raise CommandError(f"{args.contract}: {err}") from None
    root: Path = args.output
    repo_id = args.repo_id or args.push_to_hub or f"local/{root.resolve().name}"
    from lerobot_bags.fleet_command import fleet_requested, run_fleet

    if fleet_requested(args):
        return run_fleet(args, options, repo_id)
    print(f"bag2dataset: {len(args.bags)} bag(s) -> {root}  stamp={options.stamp} align={options.align}")
    try:
        result = convert_bags(
            args.bags,
            options,
            root=root,
            repo_id=repo_id,
            append=args.append,
            allow_duplicates=args.allow_duplicates,
            codec=args.codec,
            jobs=args.jobs,
            progress=not args.quiet,
            on_episode=lambda entry: print(_episode_line(entry), flush=True),
            on_resume=lambda already: print(
                f"bag2dataset: skipping {len(already)} already converted episode(s) of "
                f"{len({entry['bag'] for entry in already})} bag(s) in {root}",
                flush=True,
            ),
            on_status=lambda line: print(f"bag2dataset: {line}", flush=True),
            exact_jobs=args.exact_jobs,
        )
    except DiskFullError as err:
        raise CommandError(str(err)) from None
    except BagError as err:
        raise CommandError(str(err) if str(err).startswith("writing ") else f"nothing written: {err}") from None
    for bag in result.bags:
        for warning in bag.get("warnings", []):
            print(f"  warning  {Path(bag['bag']).name}: {warning}")
        clock = bag.get("clock")
        if clock and "different clocks" in clock["note"]:
            print(f"  clock    {Path(bag['bag']).name}: {clock['note']}")
    for failure in result.failed:
        print(f"  FAILED   {failure['bag']}: {failure['error']}")
    rate = result.frames / result.seconds if result.seconds else 0.0
    print(
        f"bag2dataset: {len(result.episodes)} episode(s), {result.frames} frames in {result.seconds:.1f} s "
        f"({rate:.0f} frames/s); {len(result.skipped)} skipped, {len(result.failed)} failed"
    )
    if result.report_path is not None:
        print(f"sync report: {result.report_path}")
    if result.report_error is not None:
        print(f"  warning  {result.report_error}")
    if not result.episodes and result.already:
        print("bag2dataset: nothing left to convert")
    elif not result.episodes:
        raise CommandError("no episode was written (see the skipped/failed lines above); the output was not created")
    if args.push_to_hub:
        from lerobot_dataset.hub import HubError, push_dataset

        try:
            url = push_dataset(root, args.push_to_hub, private=args.private)
        except HubError as err:
            raise CommandError(str(err)) from None
        print(f"pushed to {url}")
    return 1 if result.failed else 0


def _add_dataset2bag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", type=Path, metavar="ROOT", help="dataset folder (holds meta/info.json)")
    parser.add_argument("--output", type=Path, required=True, metavar="BAG", help="bag folder to create (mcap)")
    parser.add_argument(
        "--contract", type=Path, default=None, help="contract YAML (default: the dataset's meta/contract.json)"
    )
    parser.add_argument("--episodes", type=int, nargs="+", default=None, metavar="N", help="episodes (default all)")
    parser.add_argument(
        "--start", type=float, default=None, metavar="UNIX_S", help="stamp of the first frame (default: now)"
    )


def _run_dataset2bag(args: argparse.Namespace) -> int:
    from lerobot_bags.errors import BagError
    from lerobot_bags.export import dataset_to_bag
    from lerobot_contract import Contract, ContractError, load_contract
    from lerobot_dataset import DatasetError

    try:
        if args.contract is not None:
            contract = load_contract(args.contract)
        else:
            stored = args.root / "meta" / "contract.json"
            if not stored.is_file():
                raise CommandError(f"{args.root} has no meta/contract.json; pass --contract FILE")
            contract = Contract.from_dict(json.loads(stored.read_text()), source=str(stored))
    except ContractError as err:
        raise CommandError(str(err)) from None
    try:
        summary = dataset_to_bag(args.root, args.output, contract, episodes=args.episodes, start_s=args.start)
    except (BagError, DatasetError) as err:
        raise CommandError(str(err)) from None
    print(
        f"dataset2bag: {summary['episodes']} episode(s), {summary['messages']} messages on "
        f"{len(summary['topics'])} topics -> {args.output}{os.sep}"
    )
    return 0


BAG2DATASET = Command(
    name="bag2dataset",
    help="convert rosbag2 bags into a LeRobot v3 dataset using a robot contract",
    description=(__doc__ or "")
    + "\nResampling: frame 0 at the first time every feature has data; each frame holds, per feature, the newest"
    " sample stamped at or before the frame time (--align hold). A sync report (skew, drops, coverage) is"
    " printed and saved next to the dataset as ROOT.sync_report.json.",
    add_arguments=_add_bag2dataset,
    run=_run_bag2dataset,
)

DATASET2BAG = Command(
    name="dataset2bag",
    help="write dataset episodes back into an mcap bag (JointState/Image topics from the contract)",
    description=__doc__ or "",
    add_arguments=_add_dataset2bag,
    run=_run_dataset2bag,
)
