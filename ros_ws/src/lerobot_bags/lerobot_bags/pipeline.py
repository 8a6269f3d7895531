"""Bags -> one LeRobot v3 dataset: check every bag first, convert (serially or with worker processes), write
episodes in bag order through `DatasetWriter`, and keep a sync report next to the dataset.

Parallel conversion (`jobs` > 1): each bag is converted in its own worker process, up to `jobs` at a time:
read, aligned, decoded and encoded there into episodes staged on disk (`EpisodeStager`, inside the dataset's
staging area). The parent commits the staged episodes bag after bag in command-line order
(`DatasetWriter.commit_staged`: stream copies and metadata, no pixels), so the dataset equals a serial run's.
Frames never cross between processes; a worker's memory is what a serial run needs for one bag. A worker dies
with the converting process (`die_with`: a thread waiting on the converter's pidfd), also when that one is
SIGKILLed, so a killed conversion leaves no process converting.

Resume: every episode's source (bag, part, time range, bag hash) is recorded in the dataset (`sources.py`);
running the same command again converts only what the dataset lacks, and `append` refuses a bag the dataset
already holds unless `allow_duplicates`.

Bad input is refused before anything is written (the contract bounds its fps, `check_output`, the preflight); a
full disk while writing ends the run with `DiskFullError`, the episodes committed before it stay.
"""

from __future__ import annotations

import contextlib
import errno
import json
import multiprocessing
import os
import pickle
import queue as queue_mod
import re
import resource
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lerobot_bags.convert import (
    BagEvent,
    ConvertOptions,
    EpisodeEvent,
    EpisodeStartEvent,
    Event,
    FrameEvent,
    bag_events,
    check_contract_against_bag,
)
from lerobot_bags.errors import BagError, DiskFullError
from lerobot_bags.parallelism import IdleProbe, Parallelism, choose_parallelism, usable_cores
from lerobot_bags.reader import BagSource
from lerobot_bags.sources import SourceLog, bag_hash, run_id, settings_of

if TYPE_CHECKING:
    from lerobot_dataset import DatasetWriter
    from lerobot_dataset.staging import EpisodeStager, StagedEpisode

WORKER_POLL_S = 1.0
PROGRESS_EVERY = 30  # frames between a worker's progress messages
# What `bag2dataset` encodes with when --codec is not given (measured; see the package README).
DEFAULT_CODEC = "h264-ultrafast"
# Frames waiting per camera encoder: a bag reader waits for the encoders anyway (the live recorder keeps 64 to ride
# out hiccups); 8 frames of 640x480 per camera instead of 64 keep ~100 MiB less for two cameras.
ENCODER_QUEUE_FRAMES = 8
WATCH_PARENT_S = 0.1  # where no pidfd exists: how often a worker checks that the converting process lives


@dataclass
class ConversionResult:
    """What a conversion did."""

    root: Path
    episodes: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    bags: list[dict[str, Any]] = field(default_factory=list)
    already: list[dict[str, Any]] = field(default_factory=list)  # episodes an earlier run converted (resume)
    frames: int = 0
    seconds: float = 0.0
    report_path: Path | None = None
    report_error: str | None = None
    parallelism: Parallelism | None = None  # the jobs and encoder threads this run chose (None: nothing converted)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "root": str(self.root),
            "frames": self.frames,
            "seconds": round(self.seconds, 3),
            "episodes": self.episodes,
            "skipped": self.skipped,
            "already_converted": self.already,
            "failed": self.failed,
            "bags": self.bags,
            "parallelism": None if self.parallelism is None else self.parallelism.as_dict(),
        }


def report_path_for(root: Path) -> Path:
    """Where the sync report of `root` lives: next to the dataset folder, not inside it."""
    return root.parent / f"{root.name}.sync_report.json"


def check_output(root: Path) -> None:
    """BagError unless `root` can be the dataset folder of this run: a folder (existing or not) this process can
    write in. Probed by creating (and deleting) a temporary file where the dataset's files would go."""
    try:
        root.resolve()
    except (RuntimeError, OSError):  # Python 3.12 raises RuntimeError for a symlink loop, 3.13 OSError (ELOOP)
        raise BagError(
            f"--output {root} is a symbolic link that leads back to itself (a loop); remove it or give another folder"
        ) from None
    if root.exists() and not root.is_dir():
        kind = "a file" if root.is_file() else "not a folder (a device or another special file)"
        raise BagError(f"--output {root} is {kind}; give the path of a dataset folder (new or existing)")
    probe = root
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise BagError(f"--output {root}: {probe} is a file, so no folder can be created under it")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        reason = "a read-only file system" if err.errno == errno.EROFS else err.strerror or str(err)
        raise BagError(f"--output {root}: cannot write in {probe} ({reason}); choose a writable location") from None


def preflight(bags: Sequence[Path], options: ConvertOptions) -> list[str]:
    """Open every bag and check the contract against it; returns one line per problem (empty: all good)."""
    problems = []
    for path in bags:
        try:
            with BagSource(path) as bag:
                check_contract_against_bag(
                    bag, options.contract, options.stamp, allow_type_change=options.allow_type_change
                )
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
    disk_full: bool = False


class _WorkerWriteError(Exception):
    """A worker could not stage its episode (`disk_full`: for want of space)."""

    def __init__(self, message: str, disk_full: bool) -> None:
        super().__init__(message)
        self.disk_full = disk_full


_WorkerMessage = Event | _Staged | _Progress | _WriteFailed


def die_with(pid: int) -> None:
    """End this process (SIGKILL) as soon as process `pid` ends: a watcher thread waits on a pidfd (Linux 5.3+),
    else checks every WATCH_PARENT_S.

    A worker's own parent may be the fork server, which lives on while any worker holds its pipe, so neither
    PR_SET_PDEATHSIG nor the parent pid tells a worker that the converting process was killed; its pid does.
    """

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            os.kill(os.getpid(), signal.SIGKILL)
        except (AttributeError, OSError):
            while not gone():
                time.sleep(WATCH_PARENT_S)
        else:
            select.select([fd], [], [])
        # Staged files are the dataset's staging area's, removed by its next writer; nothing to clean up here.
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name=f"die-with-{pid}", daemon=True).start()


def _worker_main(
    path: str,
    options: ConvertOptions,
    settings: dict[str, Any],
    staging: Path,
    out: multiprocessing.Queue[_WorkerMessage | None],
    skip_parts: frozenset[int],
    converter: int,
) -> None:
    """Worker process: convert one bag into episodes staged under `staging`; only small messages go to `out`."""
    from lerobot_dataset import DatasetError
    from lerobot_dataset.staging import EpisodeStager

    die_with(converter)
    stager: EpisodeStager | None = None
    count = 0
    unreported = 0
    try:
        for event in bag_events(path, options, skip_parts):
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
                    event.info["worker_parent_pid"] = os.getppid()  # the converter (fork) or the fork server
                out.put(event)
    except (DatasetError, OSError) as err:
        out.put(_WriteFailed(str(err), disk_full_cause(err) is not None))
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


def _worker_context() -> Any:
    """How workers start: forked from this process when no other Python thread runs in it (instant: the converter
    is imported already), else from a fork server (a fork of a process whose other threads may hold locks can
    deadlock the child) that starts once with the converter and the stager imported, so that each worker starts
    in milliseconds instead of re-importing numpy/rosbags/av; the server's own start (~0.5 s of imports) is paid
    before the first worker runs."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["lerobot_bags.convert", "lerobot_dataset.staging"])
    return ctx


def _parallel_events(
    bags: Sequence[Path], options: ConvertOptions, jobs: int, writer: DatasetWriter, skips: Sequence[frozenset[int]]
) -> Generator[Event | _Staged | _Progress, None, None]:
    """Messages of every bag's worker, in bag order; up to `jobs` workers convert at a time.

    A worker's messages are small (its episodes wait on disk), so a worker that is done exits even before
    the parent reads them, and the next bag's worker starts.
    """
    ctx = _worker_context()
    settings = writer.stager_settings()
    pending = deque(enumerate(bags))
    started: deque[_Worker] = deque()

    def start_more() -> None:
        while pending and sum(worker.proc.is_alive() for worker in started) < jobs:
            number, path = pending.popleft()
            out: multiprocessing.Queue[_WorkerMessage | None] = ctx.Queue()
            staging = writer.worker_staging_dir(f"{number:05d}")
            args = (str(path), options, settings, staging, out, skips[number], os.getpid())
            proc = ctx.Process(target=_worker_main, args=args, daemon=True)
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
                    raise _WorkerWriteError(message.error, message.disk_full)
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
    proc: BaseProcess
    out: multiprocessing.Queue[_WorkerMessage | None]
    staging: Path


def _serial_events(
    bags: Sequence[Path], options: ConvertOptions, skips: Sequence[frozenset[int]]
) -> Generator[Event, None, None]:
    for path, skip in zip(bags, skips, strict=True):
        yield from bag_events(path, options, skip)


def _open_writer(
    root: Path, options: ConvertOptions, repo_id: str, append: bool, codec: str | None
) -> tuple[DatasetWriter, bool]:
    """The dataset writer and whether this run created the dataset (an existing one is opened: the caller
    decides from its source records whether this run may add to it)."""
    from lerobot_dataset import DatasetWriter, feature_specs
    from lerobot_dataset.layout import STAGING_DIR

    contract = options.contract
    specs = feature_specs(contract)
    if root.exists() and (root / "meta" / "info.json").exists():
        writer = DatasetWriter.open(
            root,
            expect_features=specs,
            expect_fps=contract.fps,
            video_codec=codec,
            default_codec=DEFAULT_CODEC,
            max_pending_frames=ENCODER_QUEUE_FRAMES,
        )
        ours = {"meta", "data", "videos", STAGING_DIR}  # a root holding anything else is the user's to clear
        if append or writer.num_episodes or not {p.name for p in root.iterdir()} <= ours:
            return writer, False
        # No episode was ever committed (a run killed before its first commit): start over, with this run's
        # repo id and codec, as if the root did not exist.
        writer.close()
        shutil.rmtree(root)
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


@dataclass
class _Plan:
    """What this run converts: per bag its hash and the parts an earlier run converted."""

    bags: list[Path]
    hashes: list[str]
    skips: list[frozenset[int]]
    already: list[dict[str, Any]]


def _plan_sources(
    log: SourceLog,
    bags: Sequence[Path],
    hashes: Sequence[str],
    settings: str,
    *,
    root: Path,
    created: bool,
    append: bool,
    allow_duplicates: bool,
    total_episodes: int,
) -> _Plan:
    """Decide what to convert from the dataset's source records (BagError when this run may not write here)."""
    seen: dict[str, Path] = {}
    for path, digest in zip(bags, hashes, strict=True):
        if digest in seen and not allow_duplicates:
            raise BagError(
                f"{path} and {seen[digest]} hold the same bag; give it once, or pass --allow-duplicates to "
                "convert it twice"
            )
        seen.setdefault(digest, path)
    if created or allow_duplicates or total_episodes == 0:
        return _Plan(list(bags), list(hashes), [frozenset()] * len(bags), [])
    run = run_id(settings, hashes)
    if append:
        # This command run before and was interrupted: it resumes; a bag the dataset got otherwise is refused.
        for path, digest in zip(bags, hashes, strict=True):
            done = log.episodes_of(digest, other_than_run=run)
            if done:
                raise BagError(
                    f"{path} is already in {root} (episode(s) {_ranges(done)}); leave it out, or pass "
                    "--allow-duplicates to add it again"
                )
        return _resume_plan(log, bags, hashes, settings, run)
    foreign = log.foreign(hashes, settings)
    if not log.present or foreign:
        other_bags = [int(e["episode_index"]) for e in foreign if e["bag_hash"] not in hashes]
        other_settings = [int(e["episode_index"]) for e in foreign if e["bag_hash"] in hashes]
        why = (
            "it holds episodes this command did not convert (it has no bag2dataset source records)"
            if not log.present
            else f"episode(s) {_ranges(other_bags)} come from other bags"
            if other_bags
            else f"episode(s) {_ranges(other_settings)} were converted with other settings (contract, --split, "
            "--task, --task-topic, --stamp, --align or --tolerance)"
        )
        raise BagError(
            f"{root} already holds a dataset and {why}; pass --append to add episodes to it, or choose another "
            "--output (to resume an interrupted conversion, repeat its command unchanged)"
        )
    return _resume_plan(log, bags, hashes, settings, None)


def _resume_plan(log: SourceLog, bags: Sequence[Path], hashes: Sequence[str], settings: str, run: str | None) -> _Plan:
    """Skip the parts (and whole bags) the dataset holds from these bags with these settings (and this run)."""
    plan = _Plan([], [], [], [])
    for path, digest in zip(bags, hashes, strict=True):
        parts = log.parts_of(digest, settings, run)
        plan.already.extend(
            {"bag": str(path), "episode_index": int(e["episode_index"]), "part": int(e["part"])}
            for e in log.episodes
            if e["bag_hash"] == digest and int(e["part"]) in parts
        )
        if log.complete(digest, settings, run):
            continue
        plan.bags.append(path)
        plan.hashes.append(digest)
        plan.skips.append(frozenset(parts))
    return plan


def _ranges(indices: Sequence[int]) -> str:
    """0-2, 5 for [0, 1, 2, 5]."""
    out: list[str] = []
    for i in sorted(indices):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


def disk_full_cause(err: BaseException) -> OSError | None:
    """The ENOSPC/EDQUOT OSError behind `err` (itself, its cause or context), if any."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return current
        if isinstance(current, _WorkerWriteError) and current.disk_full:
            return OSError(errno.ENOSPC, str(current))
        current = current.__cause__ or current.__context__
    return None


def _disk_full_error(root: Path, result: ConversionResult, kept: bool) -> DiskFullError:
    """The one-line report of a full disk: where, how much is free, about how much one more episode needs."""
    probe = root
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    sizes = [f.stat().st_size for f in root.rglob("*") if f.is_file()] if root.is_dir() else []
    episodes = len(result.episodes)
    current = 0
    for folder in ("data", "videos"):
        # A commit writes the newest data file and each camera's newest video file again, the episode appended.
        newest: dict[Path, Path] = {}
        for file in sorted((root / folder).rglob("*")) if (root / folder).is_dir() else []:
            if file.is_file():
                newest[file.parent.parent] = file
        current += sum(f.stat().st_size for f in newest.values())
    per_episode = sum(sizes) / episodes if episodes else 0.0
    estimate = (
        f"about {_size(per_episode + current)} per further episode (an episode takes ~{_size(per_episode)}, and a "
        f"commit writes the newest data and video files again, {_size(current)})"
        if episodes
        else f"more than the {_size(free)} that were free: at least one encoded episode"
    )
    state = (
        f"the {episodes} episode(s) committed before are intact; free space and repeat the command to convert the rest"
        if kept and episodes
        else "nothing was kept"
    )
    return DiskFullError(
        f"disk full while writing {root}: {_size(free)} free there; free space needed: {estimate}; {state}"
    )


def _size(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f} MB" if nbytes >= 1e6 else f"{nbytes / 1e3:.0f} KB"


def convert_bags(
    bags: Sequence[Path],
    options: ConvertOptions,
    *,
    root: Path,
    repo_id: str,
    append: bool = False,
    allow_duplicates: bool = False,
    codec: str | None = None,
    jobs: int = 1,
    progress: bool = False,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
    on_resume: Callable[[list[dict[str, Any]]], None] | None = None,
    progress_stream: TextIO | None = None,
    on_status: Callable[[str], None] | None = None,
    idle_cores: float | None = None,
    exact_jobs: bool = False,
) -> ConversionResult:
    """Convert `bags` into the dataset at `root` (see the module docstring).

    Raises BagError before writing anything when a bag does not fit the contract or the output is unusable;
    a bag that fails part-way loses only its open episode (reported in `failed`), earlier episodes stay.
    An existing dataset at `root` is resumed when this command converted it (its source records name only
    these bags, with these settings), else refused unless `append`; `append` refuses a bag the dataset already
    holds unless `allow_duplicates`. DiskFullError when the disk fills (committed episodes stay).

    `jobs` is an upper bound: at most one job per idle core runs (`parallelism.choose_parallelism`, from
    `idle_cores` or, when None, the idle CPU measured now); `on_status` gets one line when fewer run.
    `exact_jobs` runs `jobs` workers (at most one per bag) whatever the cores.
    """
    from lerobot_dataset import DatasetError

    if not bags:
        raise BagError("no bag given")
    probe = IdleProbe()  # measures while the bags are checked and hashed
    check_output(root)
    problems = preflight(bags, options)
    if problems:
        raise BagError("; ".join(problems))
    hashes = [bag_hash(Path(bag)) for bag in bags]
    started = time.monotonic()
    result = ConversionResult(root=root)
    created = False
    try:
        writer, created = _open_writer(root, options, repo_id, append, codec)
    except DatasetError as err:
        raise BagError(str(err)) from None
    except OSError as err:
        if created or not (root / "meta" / "info.json").exists():
            shutil.rmtree(root, ignore_errors=True)
        if disk_full_cause(err):
            raise _disk_full_error(root, result, kept=False) from None
        raise BagError(f"cannot create {root}: {err}") from None
    created = created or writer.num_episodes == 0  # a root with no committed episode is not kept either
    try:
        log = SourceLog.load(root, writer.num_episodes)
        settings = log.add_settings(settings_of(options))
        run = run_id(settings, hashes)
        plan = _plan_sources(
            log,
            bags,
            hashes,
            settings,
            root=root,
            created=created,
            append=append,
            allow_duplicates=allow_duplicates,
            total_episodes=writer.num_episodes,
        )
    except BaseException:
        writer.close()
        _drop_if_empty(root, created, result)
        raise
    result.already = plan.already
    if plan.bags:
        result.parallelism = _parallelism(
            writer, jobs, len(plan.bags), probe if idle_cores is None else idle_cores, exact_jobs
        )
        writer.encoder_threads = result.parallelism.encoder_threads
        if result.parallelism.note is not None and on_status is not None:
            on_status(result.parallelism.note)
        jobs = result.parallelism.jobs
    if plan.already and on_resume is not None:
        on_resume(plan.already)  # before converting: what an earlier run converted, and is skipped
    bar = None
    if progress:
        from lerobot_ros.progress import progress_bar

        bar = progress_bar("bag2dataset", "frame", stream=progress_stream or sys.stderr)
    events: Generator[Event | _Staged | _Progress, None, None] = (
        _serial_events(plan.bags, options, plan.skips)
        if jobs <= 1 or len(plan.bags) <= 1
        else _parallel_events(plan.bags, options, jobs, writer, plan.skips)
    )
    hash_of = {str(path): digest for path, digest in zip(plan.bags, plan.hashes, strict=True)}

    def record(event: EpisodeEvent) -> None:
        """The episode's source, written before its commit (see sources.py)."""
        start = event.report.get("start_stamp_s")
        log.add_episode(
            {
                "episode_index": writer.num_episodes,
                "bag": str(Path(event.bag).resolve()),
                "bag_hash": hash_of[event.bag],
                "part": event.part,
                "start_stamp_s": start,
                "end_stamp_s": None if start is None else start + event.frames / options.contract.fps,
                "frames": event.frames,
                "settings": settings,
                "run": run,
            }
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
                    staged = event.load()
                    record(event.episode)
                    saved(writer.commit_staged(staged), event.episode)
                elif isinstance(event, EpisodeEvent):
                    if in_episode:
                        in_episode = False
                        record(event)
                        saved(writer.save_episode(), event)
                    elif not event.converted_before:
                        result.skipped.append(event.report)
                        if on_episode is not None:
                            on_episode(event.report)
                elif isinstance(event, BagEvent):
                    if event.error is not None:
                        if in_episode:
                            writer.discard_episode()
                            in_episode = False
                        result.failed.append({"bag": event.bag, "error": event.error})
                    else:
                        log.add_bag(
                            {
                                "bag": str(Path(event.bag).resolve()),
                                "bag_hash": hash_of[event.bag],
                                "settings": settings,
                                "run": run,
                            }
                        )
                    result.bags.append({**event.info, **({"error": event.error} if event.error else {})})
    except (DatasetError, OSError, _WorkerWriteError) as err:
        # The writer refused a frame or failed to commit (the open episode is already discarded).
        kept = not _drop_if_empty(root, created, result)
        if disk_full_cause(err) is not None:
            raise _disk_full_error(root, result, kept) from None
        raise BagError(f"writing {root} failed: {err}") from None
    except BaseException:
        _drop_if_empty(root, created, result)
        raise
    finally:
        if bar is not None:
            bar.close()
    result.seconds = time.monotonic() - started
    if not _drop_if_empty(root, created, result):
        try:
            result.report_path = _save_report(root, result)
        except OSError as err:
            result.report_error = f"the sync report {report_path_for(root)} was not saved: {err}"
    return result


def _parallelism(writer: DatasetWriter, jobs: int, bags: int, idle: float | IdleProbe, exact_jobs: bool) -> Parallelism:
    """The jobs and encoder threads to convert `bags` bags with (see `parallelism.py`). The idle CPU is only
    measured when it decides something: several jobs asked for, or an encoder whose threads follow the cores."""
    from lerobot_dataset.video import video_encoding

    cameras = sum(spec.dtype == "video" for spec in writer.features.values())
    cores = usable_cores()
    if exact_jobs:
        jobs = min(jobs, bags)
        cores = max(cores, jobs)
        idle = float(cores)
    if isinstance(idle, IdleProbe):
        threads_follow_cores = cameras > 0 and video_encoding(writer.video_codec).threads is None
        idle = idle.idle_cores() if (jobs > 1 and bags > 1) or threads_follow_cores else float(cores)
    return choose_parallelism(jobs, bags=bags, cameras=cameras, cores=cores, idle_cores=idle)


def _drop_if_empty(root: Path, created: bool, result: ConversionResult) -> bool:
    """Remove a dataset this run created when no episode made it in (no empty dataset is left behind)."""
    if created and not result.episodes:
        shutil.rmtree(root, ignore_errors=True)
        return True
    return False


# A list of numbers as `json.dumps(indent=2)` writes it, one number a line (a JSON string never holds a raw line break).
_NUMBER_LIST = re.compile(r"\[\n\s*(-?[0-9][0-9.eE+-]*(?:,\n\s*-?[0-9][0-9.eE+-]*)*)\n\s*\]")


def _report_json(data: Any) -> str:
    """Indented JSON with each list of numbers (the per-frame skews) on one line."""
    return _NUMBER_LIST.sub(
        lambda m: "[" + ", ".join(n.strip() for n in m.group(1).split(",")) + "]", json.dumps(data, indent=2)
    )


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
    tmp.write_text(_report_json({"dataset": str(root), "runs": runs}))
    tmp.replace(path)
    return path
