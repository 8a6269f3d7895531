"""`lerobot-ros dataset merge|split|filter`: datasets as a collection (dataset/merge.py does the work).

lerobot-ros dataset merge A B C --output ALL
lerobot-ros dataset split ROOT --output-dir SPLITS --fractions train=0.9,val=0.1 [--seed 0]
lerobot-ros dataset split ROOT --output-dir SPLITS --episodes train=0,1,2 --episodes val=3
lerobot-ros dataset filter ROOT --episodes 0 3 5 --output OUT       (or --exclude-episodes 4 7)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lerobot_ros.command import CommandError


def _add_sizes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunks-size", type=int, help="files per chunk folder (default: the first source's)")
    parser.add_argument("--data-files-size-mb", type=float, help="data file rollover size (default: the source's)")
    parser.add_argument("--video-files-size-mb", type=float, help="mp4 rollover size (default: the source's)")


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", type=Path, nargs="+", metavar="ROOT", help="datasets to merge, in order")
    parser.add_argument("--output", type=Path, required=True, help="new dataset folder (must not exist)")
    parser.add_argument(
        "--robot-type",
        help="robot_type of the merged dataset; required when the sources' robot_type differ (refused otherwise)",
    )
    parser.add_argument(
        "--video-codec",
        help="output video encoding (libsvtav1, h264, h264-ultrafast); default: the first source's codec. Episodes "
        "already in that codec are copied, the others re-encoded",
    )
    parser.add_argument("--reencode", action="store_true", help="re-encode every episode's video (never copy)")
    _add_sizes(parser)


def _print_report(report: object, started: float) -> None:
    from lerobot_dataset.merge import MergeReport

    assert isinstance(report, MergeReport)
    print(f"{report.summary()} in {time.perf_counter() - started:.1f} s")
    for line in report.reencoded:
        print(f"  re-encoded: {line}")
    for line in report.notes:
        print(f"  note: {line}")


def run_merge(args: argparse.Namespace) -> int:
    from lerobot_dataset import DatasetError
    from lerobot_dataset.merge import merge_datasets

    started = time.perf_counter()
    try:
        report = merge_datasets(
            args.sources,
            args.output,
            robot_type=args.robot_type,
            video_codec=args.video_codec,
            reencode=args.reencode,
            chunks_size=args.chunks_size,
            data_files_size_in_mb=args.data_files_size_mb,
            video_files_size_in_mb=args.video_files_size_mb,
        )
    except DatasetError as err:
        raise CommandError(str(err)) from None
    _print_report(report, started)
    return 0


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", type=Path, metavar="ROOT", help="source dataset")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--episodes", type=int, nargs="+", help="episode indices to keep")
    which.add_argument("--exclude-episodes", type=int, nargs="+", help="episode indices to drop")
    parser.add_argument("--output", type=Path, required=True, help="new dataset folder (must not exist)")


def run_filter(args: argparse.Namespace) -> int:
    from lerobot_dataset import DatasetError
    from lerobot_dataset.merge import select_episodes

    started = time.perf_counter()
    try:
        report = select_episodes(args.root, args.output, episodes=args.episodes, exclude=args.exclude_episodes)
    except DatasetError as err:
        raise CommandError(str(err)) from None
    _print_report(report, started)
    return 0


def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", type=Path, metavar="ROOT", help="source dataset")
    parser.add_argument("--output-dir", type=Path, required=True, help="one dataset per split: OUTPUT_DIR/<name>")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--fractions",
        help="NAME=FRACTION,... e.g. train=0.9,val=0.1 (LeRobot's rule: int(n x fraction) episodes each, in order, "
        "the last split takes the rest)",
    )
    which.add_argument(
        "--episodes", action="append", metavar="NAME=I,J,...", help="explicit episodes of one split (repeatable)"
    )
    parser.add_argument("--seed", type=int, help="shuffle the episodes with this seed before --fractions")


def _parse_pairs(text: str, option: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise CommandError(f"{option} {text!r}: expected NAME=VALUE pairs, e.g. train=0.9,val=0.1")
        pairs.append((name.strip(), value.strip()))
    return pairs


def parse_split_episodes(items: list[str]) -> dict[str, list[int]]:
    splits: dict[str, list[int]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CommandError(f"--episodes {item!r}: expected NAME=I,J,..., e.g. --episodes val=3,7")
        try:
            splits[name] = [int(v) for v in value.split(",") if v.strip()]
        except ValueError:
            raise CommandError(f"--episodes {item!r}: episode indices must be integers") from None
    return splits


def run_split(args: argparse.Namespace) -> int:
    from lerobot_dataset import DatasetError
    from lerobot_dataset.merge import fraction_splits, split_dataset
    from lerobot_dataset.meta import DatasetMeta

    started = time.perf_counter()
    try:
        if args.fractions is not None:
            fractions = {}
            for name, value in _parse_pairs(args.fractions, "--fractions"):
                try:
                    fractions[name] = float(value)
                except ValueError:
                    raise CommandError(f"--fractions: {name}={value} is not a number") from None
            total = DatasetMeta.load(args.root).total_episodes
            splits = fraction_splits(total, fractions, seed=args.seed)
            skipped = [name for name in fractions if name not in splits]
            for name in skipped:
                print(f"split {name!r} gets no episode of {total} and is left out")
        else:
            if args.seed is not None:
                raise CommandError("--seed shuffles --fractions; explicit --episodes are used as given")
            splits = parse_split_episodes(args.episodes)
        reports = split_dataset(args.root, args.output_dir, splits)
    except DatasetError as err:
        raise CommandError(str(err)) from None
    for name, report in reports.items():
        print(f"{name}: episodes {splits[name]}")
        _print_report(report, started)
    return 0
