"""Bags -> one LeRobot v3 dataset: check every bag first, convert (serially or with worker processes), write
episodes in bag order through `DatasetWriter`, and keep a sync report next to the dataset.

Parallel conversion: each bag is read, aligned and decoded in its own worker process and streams its frames
through a bounded queue; the parent writes bag after bag in command-line order, so the dataset is the same as
a serial run's and memory stays bounded (a worker that runs ahead blocks on its queue).
"""

from __future__ import annotations

import json
import multiprocessing
import queue as queue_mod
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lerobot_recorder.bags.convert import (
    BagEvent,
    ConvertOptions,
    EpisodeEvent,
    EpisodeStartEvent,
    Event,
    FrameEvent,
    bag_events,
    check_contract_against_bag,
)
from lerobot_recorder.bags.errors import BagError
from lerobot_recorder.bags.reader import BagSource

if TYPE_CHECKING:
    from lerobot_recorder.dataset import DatasetWriter

QUEUE_FRAMES = 16
WORKER_POLL_S = 1.0


@dataclass
class ConversionResult:
    """What a conversion did."""

    root: Path
    episodes: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    bags: list[dict[str, Any]] = field(default_factory=list)
    frames: int = 0
    seconds: float = 0.0
    report_path: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "root": str(self.root),
            "frames": self.frames,
            "seconds": round(self.seconds, 3),
            "episodes": self.episodes,
            "skipped": self.skipped,
            "failed": self.failed,
            "bags": self.bags,
        }


def report_path_for(root: Path) -> Path:
    """Where the sync report of `root` lives: next to the dataset folder, not inside it."""
    return root.parent / f"{root.name}.sync_report.json"


def preflight(bags: Sequence[Path], options: ConvertOptions) -> list[str]:
    """Open every bag and check the contract against it; returns one line per problem (empty: all good)."""
    problems = []
    for path in bags:
        try:
            with BagSource(path) as bag:
                check_contract_against_bag(bag, options.contract, options.stamp)
                for topic in filter(None, (options.task_topic, options.split.topic)):
                    if topic not in bag.info.topics:
                        raise BagError(f"bag {path} has no topic {topic}")
        except BagError as err:
            problems.append(str(err))
    return problems


def _worker_main(path: str, options: ConvertOptions, out: multiprocessing.Queue[Event | None]) -> None:
    """Worker process: stream one bag's events into `out`."""
    try:
        for event in bag_events(path, options):
            out.put(event)
    finally:
        out.put(None)


def _parallel_events(bags: Sequence[Path], options: ConvertOptions, jobs: int) -> Iterator[Event]:
    """Events of every bag in order, produced by up to `jobs` worker processes."""
    # Not fork: the parent runs encoder threads. The fork server starts once with the converter imported,
    # so each worker starts in milliseconds instead of re-importing numpy/rosbags/cv2.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["lerobot_recorder.bags.convert"])
    pending = deque(bags)
    running: deque[tuple[Path, ForkServerProcess, multiprocessing.Queue[Event | None]]] = deque()

    def start_more() -> None:
        while pending and len(running) < jobs:
            path = pending.popleft()
            out: multiprocessing.Queue[Event | None] = ctx.Queue(QUEUE_FRAMES)
            proc = ctx.Process(target=_worker_main, args=(str(path), options, out), daemon=True)
            proc.start()
            running.append((path, proc, out))

    try:
        start_more()
        while running:
            path, proc, out = running[0]
            while True:
                try:
                    event = out.get(timeout=WORKER_POLL_S)
                except queue_mod.Empty:
                    if not proc.is_alive():
                        yield BagEvent(str(path), {}, error=f"worker for {path} died (exit code {proc.exitcode})")
                        break
                    continue
                if event is None:
                    break
                yield event
            proc.join()
            running.popleft()
            start_more()
    finally:
        for _, proc, _ in running:
            if proc.is_alive():
                proc.terminate()
            proc.join()


def _serial_events(bags: Sequence[Path], options: ConvertOptions) -> Iterator[Event]:
    for path in bags:
        yield from bag_events(path, options)


def _open_writer(
    root: Path, options: ConvertOptions, repo_id: str, append: bool, codec: str | None
) -> tuple[DatasetWriter, bool]:
    """The dataset writer and whether this run created the dataset."""
    from lerobot_recorder.dataset import DatasetWriter

    contract = options.contract
    specs = contract.feature_specs()
    if root.exists() and (root / "meta" / "info.json").exists():
        if not append:
            raise BagError(f"{root} already holds a dataset; pass --append to add episodes to it")
        return DatasetWriter.open(root, expect_features=specs, expect_fps=contract.fps, video_codec=codec), False
    if root.exists() and any(root.iterdir()):
        raise BagError(f"{root} exists and is not a LeRobot dataset; choose an empty or new --output")
    writer = DatasetWriter.create(
        root,
        repo_id=repo_id,
        fps=contract.fps,
        features=specs,
        robot_type=contract.robot_type,
        video_codec=codec or "libsvtav1",
        contract=contract.to_dict(),
    )
    return writer, True


def convert_bags(
    bags: Sequence[Path],
    options: ConvertOptions,
    *,
    root: Path,
    repo_id: str,
    append: bool = False,
    codec: str | None = None,
    jobs: int = 1,
    progress: bool = False,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
    progress_stream: TextIO | None = None,
) -> ConversionResult:
    """Convert `bags` into the dataset at `root` (see the module docstring).

    Raises BagError before writing anything when a bag does not fit the contract or the output is unusable;
    a bag that fails part-way loses only its open episode (reported in `failed`), earlier episodes stay.
    """
    from lerobot_recorder.dataset import DatasetError

    if not bags:
        raise BagError("no bag given")
    problems = preflight(bags, options)
    if problems:
        raise BagError("; ".join(problems))
    started = time.monotonic()
    try:
        writer, created = _open_writer(root, options, repo_id, append, codec)
    except DatasetError as err:
        raise BagError(str(err)) from None
    result = ConversionResult(root=root)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(unit="frame", desc="bag2dataset", file=progress_stream or sys.stderr, dynamic_ncols=True)
    events = _serial_events(bags, options) if jobs <= 1 or len(bags) == 1 else _parallel_events(bags, options, jobs)
    in_episode = False
    try:
        with writer:
            for event in events:
                if isinstance(event, EpisodeStartEvent):
                    writer.start_episode(event.task)
                    in_episode = True
                elif isinstance(event, FrameEvent):
                    writer.add_frame(event.values)
                    if bar is not None:
                        bar.update(1)
                elif isinstance(event, EpisodeEvent):
                    if in_episode:
                        index = writer.save_episode()
                        in_episode = False
                        entry = {"episode_index": index, **event.report}
                        result.episodes.append(entry)
                        result.frames += event.frames
                        if on_episode is not None:
                            on_episode(entry)
                    else:
                        result.skipped.append(event.report)
                        if on_episode is not None:
                            on_episode(event.report)
                elif isinstance(event, BagEvent):
                    if event.error is not None:
                        if in_episode:
                            writer.discard_episode()
                            in_episode = False
                        result.failed.append({"bag": event.bag, "error": event.error})
                    result.bags.append({**event.info, **({"error": event.error} if event.error else {})})
    finally:
        if bar is not None:
            bar.close()
    result.seconds = time.monotonic() - started
    if created and not result.episodes:
        shutil.rmtree(root, ignore_errors=True)
    else:
        result.report_path = _save_report(root, result)
    return result


def _save_report(root: Path, result: ConversionResult) -> Path:
    """Append this run to the JSON sync report next to the dataset (atomic replace)."""
    path = report_path_for(root)
    runs: list[Any] = []
    if path.exists():
        try:
            loaded = json.loads(path.read_text())
            runs = list(loaded.get("runs", [])) if isinstance(loaded, dict) else []
        except (OSError, json.JSONDecodeError):
            runs = []
    runs.append(result.as_dict())
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"dataset": str(root), "runs": runs}, indent=2))
    tmp.replace(path)
    return path
