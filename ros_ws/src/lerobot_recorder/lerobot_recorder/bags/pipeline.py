"""Bags -> one LeRobot v3 dataset: check every bag first, convert (serially or with worker processes), write
episodes in bag order through `DatasetWriter`, and keep a sync report next to the dataset.

Parallel conversion (`jobs` > 1): each bag is converted in its own worker process, up to `jobs` at a time:
read, aligned, decoded and encoded there into episodes staged on disk (`EpisodeStager`, inside the dataset's
staging area). The parent commits the staged episodes bag after bag in command-line order
(`DatasetWriter.commit_staged`: stream copies and metadata, no pixels), so the dataset equals a serial run's.
Frames never cross between processes; a worker's memory is what a serial run needs for one bag.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import pickle
import queue as queue_mod
import resource
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
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
    from lerobot_recorder.dataset.staging import EpisodeStager, StagedEpisode

WORKER_POLL_S = 1.0
PROGRESS_EVERY = 30  # frames between a worker's progress messages
# What `bag2dataset` encodes with when --codec is not given (measured; see the package README).
DEFAULT_CODEC = "h264-ultrafast"
# Frames waiting per camera encoder: a bag reader waits for the encoders anyway (the live recorder keeps 64 to ride
# out hiccups); 8 frames of 640x480 per camera instead of 64 keep ~100 MiB less for two cameras.
ENCODER_QUEUE_FRAMES = 8


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


@dataclass
class _Staged:
    """A worker staged an episode: its report, and where the pickled `StagedEpisode` lies."""

    episode: EpisodeEvent
    staged_file: Path

    def load(self) -> StagedEpisode:
        staged: StagedEpisode = pickle.loads(self.staged_file.read_bytes())
        return staged


@dataclass
class _Progress:
    """A worker added `frames` more frames to its episodes."""

    frames: int


@dataclass
class _WriteFailed:
    """A worker's stager refused a frame or failed to encode (the whole conversion stops, as in a serial run)."""

    error: str


_WorkerMessage = Event | _Staged | _Progress | _WriteFailed


def _worker_main(
    path: str,
    options: ConvertOptions,
    settings: dict[str, Any],
    staging: Path,
    out: multiprocessing.Queue[_WorkerMessage | None],
) -> None:
    """Worker process: convert one bag into episodes staged under `staging`; only small messages go to `out`."""
    from lerobot_recorder.dataset import DatasetError
    from lerobot_recorder.dataset.staging import EpisodeStager

    stager: EpisodeStager | None = None
    count = 0
    unreported = 0
    try:
        for event in bag_events(path, options):
            if isinstance(event, EpisodeStartEvent):
                stager = EpisodeStager(staging / f"episode-{count:06d}", task=event.task, **settings)
                count += 1
            elif isinstance(event, FrameEvent):
                assert stager is not None, "a frame before its episode started"
                stager.add_frame(event.values)
                unreported += 1
                if unreported == PROGRESS_EVERY:
                    out.put(_Progress(unreported))
                    unreported = 0
            elif isinstance(event, EpisodeEvent) and stager is not None:
                staged = stager.finish()
                stager = None
                staged_file = staged.dir / "staged.pickle"
                staged_file.write_bytes(pickle.dumps(staged))
                out.put(_Staged(event, staged_file))
            else:
                if isinstance(event, BagEvent):
                    if stager is not None:
                        stager.abort()
                        stager = None
                    usage = resource.getrusage(resource.RUSAGE_SELF)
                    event.info["worker_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
                    event.info["worker_peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
                out.put(event)
    except DatasetError as err:
        out.put(_WriteFailed(str(err)))
    except Exception as err:
        # A bug, not bad input (bag_events reports that itself): tell the parent, then fail loudly here too.
        out.put(BagEvent(path, {}, error=f"worker failed: {type(err).__name__}: {err}"))
        raise
    finally:
        if stager is not None:
            stager.abort()
        if unreported:
            out.put(_Progress(unreported))
        out.put(None)


def _parallel_events(
    bags: Sequence[Path], options: ConvertOptions, jobs: int, writer: DatasetWriter
) -> Generator[Event | _Staged | _Progress, None, None]:
    """Messages of every bag's worker, in bag order; up to `jobs` workers convert at a time.

    A worker's messages are small (its episodes wait on disk), so a worker that is done exits even before
    the parent reads them, and the next bag's worker starts.
    """
    # Not fork: the parent may run threads. The fork server starts once with the converter and the stager
    # imported, so each worker starts in milliseconds instead of re-importing numpy/rosbags/av.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["lerobot_recorder.bags.convert", "lerobot_recorder.dataset.staging"])
    settings = writer.stager_settings()
    pending = deque(enumerate(bags))
    started: deque[_Worker] = deque()

    def start_more() -> None:
        while pending and sum(worker.proc.is_alive() for worker in started) < jobs:
            number, path = pending.popleft()
            out: multiprocessing.Queue[_WorkerMessage | None] = ctx.Queue()
            staging = writer.worker_staging_dir(f"{number:05d}")
            proc = ctx.Process(target=_worker_main, args=(str(path), options, settings, staging, out), daemon=True)
            proc.start()
            started.append(_Worker(path, proc, out, staging))

    try:
        start_more()
        while started:
            worker = started[0]
            finished = False
            while True:
                try:
                    message = worker.out.get(timeout=WORKER_POLL_S)
                except queue_mod.Empty:
                    start_more()
                    if not worker.proc.is_alive():
                        if not finished:
                            code = worker.proc.exitcode
                            yield BagEvent(str(worker.path), {}, error=f"worker for {worker.path} died (exit {code})")
                        break
                    continue
                if message is None:
                    if not finished:
                        yield BagEvent(str(worker.path), {}, error=f"worker for {worker.path} ended without a result")
                    break
                if isinstance(message, _WriteFailed):
                    from lerobot_recorder.dataset import DatasetError

                    raise DatasetError(message.error)
                finished = finished or isinstance(message, BagEvent)
                if isinstance(message, _Progress):
                    start_more()
                yield message
            worker.proc.join()
            started.popleft()
            shutil.rmtree(worker.staging, ignore_errors=True)
            start_more()
    finally:
        for worker in started:
            if worker.proc.is_alive():
                worker.proc.terminate()
            worker.proc.join()
            shutil.rmtree(worker.staging, ignore_errors=True)


@dataclass
class _Worker:
    path: Path
    proc: ForkServerProcess
    out: multiprocessing.Queue[_WorkerMessage | None]
    staging: Path


def _serial_events(bags: Sequence[Path], options: ConvertOptions) -> Generator[Event, None, None]:
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
        writer = DatasetWriter.open(
            root,
            expect_features=specs,
            expect_fps=contract.fps,
            video_codec=codec,
            default_codec=DEFAULT_CODEC,
            max_pending_frames=ENCODER_QUEUE_FRAMES,
        )
        return writer, False
    if root.exists() and any(root.iterdir()):
        raise BagError(f"{root} exists and is not a LeRobot dataset; choose an empty or new --output")
    writer = DatasetWriter.create(
        root,
        repo_id=repo_id,
        fps=contract.fps,
        features=specs,
        robot_type=contract.robot_type,
        video_codec=codec or DEFAULT_CODEC,
        max_pending_frames=ENCODER_QUEUE_FRAMES,
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
    events: Generator[Event | _Staged | _Progress, None, None] = (
        _serial_events(bags, options) if jobs <= 1 or len(bags) == 1 else _parallel_events(bags, options, jobs, writer)
    )

    def saved(index: int, event: EpisodeEvent) -> None:
        entry = {"episode_index": index, **event.report}
        result.episodes.append(entry)
        result.frames += event.frames
        if on_episode is not None:
            on_episode(entry)

    in_episode = False
    try:
        with writer, contextlib.closing(events):
            for event in events:
                if isinstance(event, EpisodeStartEvent):
                    writer.start_episode(event.task)
                    in_episode = True
                elif isinstance(event, FrameEvent):
                    writer.add_frame(event.values)
                    if bar is not None:
                        bar.update(1)
                elif isinstance(event, _Progress):
                    if bar is not None:
                        bar.update(event.frames)
                elif isinstance(event, _Staged):
                    saved(writer.commit_staged(event.load()), event.episode)
                elif isinstance(event, EpisodeEvent):
                    if in_episode:
                        in_episode = False
                        saved(writer.save_episode(), event)
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
    except DatasetError as err:
        # The writer refused a frame or failed to commit (the open episode is already discarded).
        _drop_if_empty(root, created, result)
        raise BagError(f"writing {root} failed: {err}") from None
    except BaseException:
        _drop_if_empty(root, created, result)
        raise
    finally:
        if bar is not None:
            bar.close()
    result.seconds = time.monotonic() - started
    if not _drop_if_empty(root, created, result):
        result.report_path = _save_report(root, result)
    return result


def _drop_if_empty(root: Path, created: bool, result: ConversionResult) -> bool:
    """Remove a dataset this run created when no episode made it in (no empty dataset is left behind)."""
    if created and not result.episodes:
        shutil.rmtree(root, ignore_errors=True)
        return True
    return False


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
