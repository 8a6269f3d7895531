"""The dataset side of the live recorder: one thread owns the DatasetWriter and turns sampled frames into rows.

Sampling must never wait for disk or encoders, so sampled frames go through a bounded queue to this thread,
which deserializes and decodes the images a frame holds (each message once, even when several frames hold
it), checks them against the contract, and hands them to the writer (whose per-camera workers encode video).
When the queue is full the frame is dropped and counted (`overrun`): memory stays bounded however long the
episode. Start/save/discard go through the same queue, so they apply in order with the frames.
"""

from __future__ import annotations

import contextlib
import errno
import queue
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lerobot_contract import MessageMismatchError
from lerobot_contract.align import AlignedFrame
from lerobot_contract.frames import FrameDecoder
from lerobot_dataset import DatasetError, DatasetWriter, EncoderError
from lerobot_dataset.commit import uncommitted_dataset


@dataclass(frozen=True)
class SinkEvent:
    """What the sink thread did: `started`, `saved`, `discarded` or `failed` (with `fatal` for disk full, `empty`
    for an episode that had no frames to save)."""

    kind: str
    episode_index: int = -1
    frames: int = 0
    message: str = ""
    fatal: bool = False
    empty: bool = False


@dataclass
class SinkCounters:
    """Per-episode counters of the sink thread (read from other threads; plain ints)."""

    written: int = 0
    overrun: int = 0
    bad_frames: int = 0
    last_problem: str = ""


def is_disk_full(err: BaseException) -> bool:
    """True when `err` (or what caused it) is ENOSPC / EDQUOT."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def disk_free_bytes(path: Path) -> int:
    """Free bytes on the file system holding `path` (or its nearest existing parent)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


class EpisodeSink:
    """Runs the DatasetWriter in its own thread (see the module docstring). `on_event` runs in that thread."""

    _STOP = object()

    def __init__(
        self,
        writer: DatasetWriter,
        values: FrameDecoder,
        on_event: Callable[[SinkEvent], None],
        *,
        max_queue: int = 64,
        min_free_bytes: int = 0,
    ) -> None:
        self.writer = writer
        self.values = values
        self.on_event = on_event
        self.min_free_bytes = min_free_bytes
        self.counters = SinkCounters()
        self.max_queue = max_queue
        # One queue keeps frames and controls in order; only frames count against `max_queue`.
        self._queue: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self._frames_queued = 0
        self._lock = threading.Lock()
        self._episode_open = False
        self._thread = threading.Thread(target=self._run, name="recorder-sink", daemon=True)
        self._thread.start()

    @property
    def queued_frames(self) -> int:
        """Frames sampled but not yet handed to the writer."""
        return self._frames_queued

    @property
    def encode_lag_frames(self) -> int:
        """Frames handed to the writer that its encoders have not taken yet (largest over cameras)."""
        return self.writer.encode_lag_frames

    def start_episode(self, task: str) -> None:
        """Open the next episode (counters restart when the thread gets there, after earlier frames)."""
        self._control(("start", task))

    def put_frame(self, frame: AlignedFrame) -> bool:
        """Queue a sampled frame; False (and counted as overrun) when the queue is full."""
        with self._lock:
            if self._frames_queued >= self.max_queue:
                self.counters.overrun += 1
                return False
            self._frames_queued += 1
        self._queue.put(("frame", frame))
        return True

    def save_episode(self) -> None:
        self._control(("save", None))

    def discard_episode(self) -> None:
        self._control(("discard", None))

    def run_after(self, job: Callable[[], None]) -> None:
        """Run `job` in the sink thread once everything queued before it is done (e.g. a hub push)."""
        self._control(("job", job))

    def close(self, timeout: float = 30.0) -> None:
        """Finish queued work, discard an unsaved episode, close the writer."""
        self._control((self._STOP, None))
        self._thread.join(timeout)

    def _control(self, item: tuple[Any, Any]) -> None:
        self._queue.put(item)

    def _run(self) -> None:
        while True:
            kind, arg = self._queue.get()
            if kind == "frame":
                with self._lock:
                    self._frames_queued -= 1
                self._write(arg)
            elif kind is self._STOP:
                self._close()
                return
            else:
                self._apply(kind, arg)

    def _write(self, frame: AlignedFrame) -> None:
        if not self._episode_open:
            return
        try:
            values = self.values.build(frame)
        except MessageMismatchError as err:
            self.counters.bad_frames += 1
            self.counters.last_problem = str(err)
            return
        try:
            self.writer.add_frame(values)
        except (DatasetError, OSError) as err:
            self._episode_failed(err, "writing a frame")
            return
        self.counters.written += 1

    def _apply(self, kind: str, arg: Any) -> None:
        if kind == "job":
            arg()
        elif kind == "start":
            self._start(str(arg))
        elif kind == "save":
            self._save()
        elif kind == "discard" and self._episode_open:
            self._episode_open = False
            self.writer.discard_episode()
            self.on_event(SinkEvent("discarded", frames=self.counters.written))

    def _start(self, task: str) -> None:
        self.counters = SinkCounters()
        self.values.reset()
        free = disk_free_bytes(self.writer.root)
        if free < self.min_free_bytes:
            self.on_event(
                SinkEvent(
                    "failed",
                    message=f"disk almost full: {free / 1e6:.1f} MB free at {self.writer.root}, below min_free_mb "
                    f"({self.min_free_bytes / 1e6:.1f} MB); free space or record elsewhere. "
                    f"{self.writer.num_episodes} saved episode(s) are intact",
                    fatal=True,
                )
            )
            return
        try:
            index = self.writer.start_episode(task)
        except (DatasetError, OSError) as err:
            self._report_failure(err, "starting an episode")
            return
        self._episode_open = True
        self.on_event(SinkEvent("started", episode_index=index))

    def _save(self) -> None:
        if not self._episode_open:
            self.on_event(SinkEvent("failed", message="no episode was open to save (it failed earlier)"))
            return
        self._episode_open = False
        frames = self.writer.episode_frames
        if frames == 0:
            self.writer.discard_episode()
            self.on_event(
                SinkEvent(
                    "failed",
                    message="the episode has no frames (no frame passed the staleness/sync checks)",
                    empty=True,
                )
            )
            return
        try:
            index = self.writer.save_episode()
        except (DatasetError, OSError) as err:
            self._report_failure(err, "saving the episode")
            return
        self.on_event(SinkEvent("saved", episode_index=index, frames=frames))

    def _episode_failed(self, err: BaseException, doing: str) -> None:
        self._episode_open = False
        with contextlib.suppress(DatasetError):  # the writer may have dropped it already
            self.writer.discard_episode()
        self._report_failure(err, doing)

    def _report_failure(self, err: BaseException, doing: str) -> None:
        full = is_disk_full(err)
        kept = f"{self.writer.num_episodes} saved episode(s) in {self.writer.root} are intact"
        if full:
            message = f"disk full while {doing}: {err}. The episode was discarded; {kept}. Free space to go on"
        elif isinstance(err, EncoderError):
            message = f"the video encoder failed while {doing}: {err}. The episode was discarded; {kept}"
        else:
            message = f"{doing} failed: {err}. The episode was discarded; {kept}"
        self.on_event(SinkEvent("failed", message=message, fatal=full))

    def _close(self) -> None:
        if self._episode_open:
            self._episode_open = False
            self.writer.discard_episode()
        self.writer.close()
        root = self.writer.root
        if self.writer.num_episodes == 0 and uncommitted_dataset(root):
            # Nothing was saved (a camera dead before the first frame): a folder of meta/ without an episode is
            # no dataset (`dataset validate` refuses it), so none is left; a later session would take it over.
            shutil.rmtree(root, ignore_errors=True)
