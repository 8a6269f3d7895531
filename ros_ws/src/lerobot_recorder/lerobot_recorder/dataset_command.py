"""`lerobot-ros dataset ACTION ROOT`: inspect and check LeRobot v3 datasets.

Actions are `DatasetAction` entries of `ACTIONS`; to add one (e.g. `push`), write its
`add_arguments`/`run` functions in a module that imports only the standard library at module
level and append it to `ACTIONS`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lerobot_dataset.collection_command import (
    add_filter_arguments,
    add_merge_arguments,
    add_split_arguments,
    run_filter,
    run_merge,
    run_split,
)
from lerobot_dataset.hub_command import add_push_arguments, run_push
from lerobot_recorder.view_command import add_dataset_view_arguments, run_dataset_view
from lerobot_ros.command import Command, CommandError


@dataclass(frozen=True)
class DatasetAction:
    """One `lerobot-ros dataset <name>` sub-action."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", type=Path, metavar="ROOT", help="dataset folder (holds meta/info.json)")


def _human_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.1f} GiB"


def _run_info(args: argparse.Namespace) -> int:
    from lerobot_dataset import DatasetError
    from lerobot_dataset.meta import DatasetMeta, data_files

    root: Path = args.root
    try:
        meta = DatasetMeta.load(root)
    except DatasetError as err:
        raise CommandError(f"{err}") from None
    info = meta.info
    fps = meta.fps
    frames = meta.total_frames
    print(f"dataset        {root}")
    print(f"format         LeRobot {info.get('codebase_version')}  robot_type={info.get('robot_type')}")
    print(f"fps            {fps}")
    print(f"episodes       {meta.total_episodes}  ({frames} frames, {frames / fps:.1f} s)")
    if meta.episodes:
        lengths = [int(e["length"]) for e in meta.episodes]
        print(f"episode length min {min(lengths)}  max {max(lengths)}  mean {sum(lengths) / len(lengths):.1f} frames")
    print(f"tasks          {len(meta.tasks)}")
    for index, task in enumerate(meta.tasks[:10]):
        print(f"  [{index}] {task}")
    if len(meta.tasks) > 10:
        print(f"  ... {len(meta.tasks) - 10} more")
    print("features")
    for key, spec in meta.features.items():
        extra = ""
        if spec.dtype == "video" and spec.info:
            extra = f"  {spec.info.get('video.codec')} {spec.info.get('video.pix_fmt')}"
        names = "" if spec.names is None or spec.is_camera else f"  {', '.join(spec.names[:6])}"
        more = " ..." if spec.names is not None and not spec.is_camera and len(spec.names) > 6 else ""
        print(f"  {key:<32} {spec.dtype:<8} {list(spec.shape)}{extra}{names}{more}")
    data = data_files(root)
    videos = sorted((root / "videos").glob("*/*/*.mp4"))
    print(f"data files     {len(data)}  ({_human_size(sum(p.stat().st_size for p in data))})")
    print(f"video files    {len(videos)}  ({_human_size(sum(p.stat().st_size for p in videos))})")
    print(f"stats.json     {'present' if meta.stats is not None else 'MISSING'}")
    contract = root / "meta" / "contract.json"
    print(f"contract       {'meta/contract.json' if contract.is_file() else 'none'}")
    return 0


def _add_validate(parser: argparse.ArgumentParser) -> None:
    _add_root(parser)
    parser.add_argument(
        "--repair",
        action="store_true",
        help="first finish an interrupted commit and remove staging leftovers (takes the writer lock)",
    )
    parser.add_argument("--skip-videos", action="store_true", help="do not open the mp4 files")


def _run_validate(args: argparse.Namespace) -> int:
    from lerobot_dataset import DatasetError, DatasetWriter
    from lerobot_dataset.validate import validate

    root: Path = args.root
    if not root.is_dir():
        raise CommandError(f"{root} is not a folder; pass the dataset root (the folder holding meta/)")
    if args.repair:
        try:
            DatasetWriter.open(root).close()
        except DatasetError as err:
            raise CommandError(f"cannot repair {root}: {err}") from None
    problems = validate(root, check_videos=not args.skip_videos)
    for problem in problems:
        print(problem)
    if problems:
        print(f"INVALID: {len(problems)} problem(s) in {root}")
        return 1
    print(f"OK: {root} is a valid LeRobot v3.0 dataset")
    return 0


ACTIONS: tuple[DatasetAction, ...] = (
    DatasetAction("info", "summary: schema, episodes, tasks, files", _add_root, _run_info),
    DatasetAction(
        "validate", "check every format invariant; exit 1 with one line per problem", _add_validate, _run_validate
    ),
    DatasetAction("push", "upload to the Hugging Face Hub (dataset card, v3.0 tag)", add_push_arguments, run_push),
    DatasetAction(
        "merge", "merge datasets into a new one (videos copied when encodings match)", add_merge_arguments, run_merge
    ),
    DatasetAction("split", "split into new datasets by fractions or episode lists", add_split_arguments, run_split),
    DatasetAction("filter", "a new dataset with chosen episodes (or all but some)", add_filter_arguments, run_filter),
    DatasetAction(
        "view",
        "show an episode in Rerun: videos, state/action plots, task, bag2dataset sync report",
        add_dataset_view_arguments,
        run_dataset_view,
    ),
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dataset_action", required=True, metavar="ACTION")
    for action in ACTIONS:
        action.add_arguments(sub.add_parser(action.name, help=action.help, description=action.help))


def _run(args: argparse.Namespace) -> int:
    by_name = {action.name: action for action in ACTIONS}
    return by_name[args.dataset_action].run(args)


COMMAND = Command(
    name="dataset",
    help="inspect and validate LeRobot v3 datasets",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
