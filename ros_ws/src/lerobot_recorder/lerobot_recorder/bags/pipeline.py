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
import resource
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from multiprocessing.context import ForkServerProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import numpy.typing as npt

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


@dataclass(frozen=True)
class _PictureLayout:
    """Where each picture feature of a frame lies inside one shared-memory slot."""

    fields: tuple[tuple[str, tuple[int, ...], str, int], ...]  # key, shape, dtype, byte offset
    slot_bytes: int

    @classmethod
    def for_contract(cls, options: ConvertOptions) -> _PictureLayout:
        fields = []
        offset = 0
        for key, feat in options.contract.features.items():
            if not feat.is_image:
                continue
            depth = feat.dtype == "depth"
            shape = (feat.shape[0] * feat.shape[1],) if depth else tuple(feat.shape)
            dtype = "float32" if depth else "uint8"
            fields.append((key, shape, dtype, offset))
            offset += int(np.prod(shape)) * np.dtype(dtype).itemsize
        return cls(tuple(fields), max(offset, 1))

    @property
    def keys(self) -> frozenset[str]:
        """The picture features."""
        return frozenset(f[0] for f in self.fields)

    def views(self, shm: shared_memory.SharedMemory, slot: int) -> dict[str, npt.NDArray[Any]]:
        """Arrays over slot `slot` of the shared block, one per picture feature."""
        buf = shm.buf
        assert buf is not None, "shared memory block is closed"
        base = slot * self.slot_bytes
        return {
            key: np.ndarray(shape, dtype=dtype, buffer=buf, offset=base + offset)
            for key, shape, dtype, offset in self.fields
        }


@dataclass
class _SharedFrame:
    """A FrameEvent whose pictures wait in shared-memory slot `slot` (vectors travel in the message)."""

    slot: int
    vectors: dict[str, npt.NDArray[Any]]


SLOTS_PER_WORKER = 8


def _worker_main(
    path: str,
    options: ConvertOptions,
    out: multiprocessing.Queue[Event | _SharedFrame | None],
    free: multiprocessing.Queue[int],
    shm_name: str,
) -> None:
    """Worker process: stream one bag's events into `out`, pictures through shared memory."""
    # The parent creates and unlinks the block; fork-server workers share its resource tracker.
    shm = shared_memory.SharedMemory(name=shm_name)
    layout = _PictureLayout.for_contract(options)
    try:
        for event in bag_events(path, options):
            if isinstance(event, FrameEvent):
                slot = free.get()
                views = layout.views(shm, slot)
                for key, view in views.items():
                    view[...] = event.values[key]
                del views
                out.put(_SharedFrame(slot, {k: v for k, v in event.values.items() if k not in layout.keys}))
            else:
                if isinstance(event, BagEvent):
                    usage = resource.getrusage(resource.RUSAGE_SELF)
                    event.info["worker_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
                    event.info["worker_peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
                out.put(event)
    except Exception as err:
        # A bug, not bad input (bag_events reports that itself): tell the parent, then fail loudly here too.
        out.put(BagEvent(path, {}, error=f"worker failed: {type(err).__name__}: {err}"))
        raise
    finally:
        out.put(None)
        shm.close()


def _parallel_events(bags: Sequence[Path], options: ConvertOptions, jobs: int) -> Iterator[Event]:
    """Events of every bag in order, produced by up to `jobs` worker processes.

    Pictures cross from worker to parent through a shared-memory ring of `SLOTS_PER_WORKER` frames per worker
    (pickling 1.8 MB per frame through a pipe costs more CPU than decoding it); a slot is handed back once the
    consumer has passed the frame to the writer (which copies pictures before `add_frame` returns).
    """
    # Not fork: the parent runs encoder threads. The fork server starts once with the converter imported,
    # so each worker starts in milliseconds instead of re-importing numpy/rosbags/cv2.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["lerobot_recorder.bags.convert"])
    layout = _PictureLayout.for_contract(options)
    pending = deque(bags)
    running: deque[_Worker] = deque()

    def start_more() -> None:
        while pending and len(running) < jobs:
            path = pending.popleft()
            shm = shared_memory.SharedMemory(create=True, size=layout.slot_bytes * SLOTS_PER_WORKER)
            out: multiprocessing.Queue[Event | _SharedFrame | None] = ctx.Queue(QUEUE_FRAMES)
            free: multiprocessing.Queue[int] = ctx.Queue()
            for slot in range(SLOTS_PER_WORKER):
                free.put(slot)
            proc = ctx.Process(target=_worker_main, args=(str(path), options, out, free, shm.name), daemon=True)
            proc.start()
            running.append(_Worker(path, proc, out, free, shm))

    try:
        start_more()
        while running:
            worker = running[0]
            finished = False
            while True:
                try:
                    event = worker.out.get(timeout=WORKER_POLL_S)
                except queue_mod.Empty:
                    if not worker.proc.is_alive():
                        if not finished:
                            code = worker.proc.exitcode
                            yield BagEvent(str(worker.path), {}, error=f"worker for {worker.path} died (exit {code})")
                        break
                    continue
                if event is None:
                    if not finished:
                        yield BagEvent(str(worker.path), {}, error=f"worker for {worker.path} ended without a result")
                    break
                finished = finished or isinstance(event, BagEvent)
                if isinstance(event, _SharedFrame):
                    values = {**event.vectors, **layout.views(worker.shm, event.slot)}
                    yield FrameEvent(values)
                    del values
                    worker.free.put(event.slot)
                else:
                    yield event
            worker.proc.join()
            running.popleft()
            worker.release()
            start_more()
    finally:
        for worker in running:
            if worker.proc.is_alive():
                worker.proc.terminate()
            worker.proc.join()
            worker.release()


@dataclass
class _Worker:
    path: Path
    proc: ForkServerProcess
    out: multiprocessing.Queue[Event | _SharedFrame | None]
    free: multiprocessing.Queue[int]
    shm: shared_memory.SharedMemory

    def release(self) -> None:
        """Free the shared memory once the worker has exited."""
        self.shm.unlink()
        try:
            self.shm.close()
        except BufferError:
            # A frame view is still referenced somewhere; the mapping goes away with it (already unlinked).
            return


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
