"""Recording one episode into a staging folder, apart from the dataset it will join.

`EpisodeStager` takes an episode's frames: numeric values stay in memory (small), every camera has a
worker thread that encodes video frames into the episode's own mp4 (or PNG-encodes `image` frames into a
spill file) and records the channel histograms for the statistics. `finish()` returns a `StagedEpisode`
(picklable: paths and vectors) that `DatasetWriter` commits. The writer stages its own episodes this way;
the bag converter's worker processes stage theirs in parallel and hand them to the writer to commit in order.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from lerobot_dataset import stats as stats_mod
from lerobot_dataset.errors import EpisodeStateError, FeatureError
from lerobot_dataset.features import FeatureSpec, coerce_value
from lerobot_dataset.images import encode_png
from lerobot_dataset.video import EpisodeVideoEncoder, FrameWorker, video_encoding


@dataclass(frozen=True)
class StagedCamera:
    """One camera's staged output: its mp4 (video) or PNG spill file with (offset, length) spans (image)."""

    spec: FeatureSpec
    histograms: Path
    mp4: Path | None = None
    png_path: Path | None = None
    png_spans: tuple[tuple[int, int], ...] = ()

    def stats(self, frames: int) -> stats_mod.FeatureStats:
        """The camera's episode statistics (LeRobot's frame sample)."""
        return stats_mod.histogram_file_stats(self.histograms, frames)

    def png_blobs(self) -> list[bytes]:
        """The PNG bytes of every frame, in order (image features)."""
        assert self.png_path is not None, "not an image feature"
        blobs: list[bytes] = []
        with self.png_path.open("rb") as f:
            for start, length in self.png_spans:
                f.seek(start)
                blobs.append(f.read(length))
        return blobs


@dataclass(frozen=True)
class StagedEpisode:
    """A finished episode waiting in `dir` to be committed by `DatasetWriter.commit_staged` (picklable)."""

    task: str
    frames: int
    dir: Path
    codec: str
    features: Mapping[str, FeatureSpec]
    values: Mapping[str, list[Any]]  # per non-camera feature: one value per frame
    cameras: Mapping[str, StagedCamera]

    def discard(self) -> None:
        """Remove the staged files (an episode that will not be committed)."""
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class _Camera:
    spec: FeatureSpec
    worker: FrameWorker
    histograms: stats_mod.CameraHistograms
    encoder: EpisodeVideoEncoder | None = None
    png_file: IO[bytes] | None = None
    png_path: Path | None = None
    png_spans: list[tuple[int, int]] = field(default_factory=list)

    def close(self) -> None:
        if self.png_file is not None:
            self.png_file.close()
        self.histograms.close()


class EpisodeStager:
    """Records one episode of `task` into `directory` (created; must not hold another episode).

    `encoder_threads` caps each camera encoder's threads (None: the codec's default).

    Not thread-safe: call it from one thread (the per-camera encoders run in their own threads).
    """

    def __init__(
        self,
        directory: Path,
        features: Mapping[str, FeatureSpec],
        *,
        fps: int,
        codec: str,
        task: str,
        max_pending: int = 64,
        encoder_threads: int | None = None,
    ) -> None:
        if not isinstance(task, str) or not task.strip():
            raise FeatureError("task must be a non-empty string describing the episode")
        video_encoding(codec)  # raises on an unknown codec
        self.dir = directory
        self.task = task
        self.frames = 0
        self._features = dict(features)
        self._fps = fps
        self._codec = codec
        self._max_pending = max_pending
        self._encoder_threads = encoder_threads
        self._values: dict[str, list[Any]] = {}
        self._cameras: dict[str, _Camera] = {}
        self._done = False
        self._aborted = False
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        try:
            for key, spec in self._features.items():
                if spec.is_camera:
                    self._cameras[key] = self._start_camera(key, spec)
                else:
                    self._values[key] = []
        except BaseException:
            self.abort()
            raise

    @property
    def encode_lag_frames(self) -> int:
        """The largest number of frames still waiting in a camera worker's queue."""
        return max((cam.worker.pending for cam in self._cameras.values()), default=0)

    def _start_camera(self, key: str, spec: FeatureSpec) -> _Camera:
        histograms = stats_mod.CameraHistograms(self.dir / f"{key}.hist")
        if spec.dtype == "video":
            height, width, _ = spec.shape
            encoder = EpisodeVideoEncoder(
                self.dir / f"{key}.mp4",
                codec=self._codec,
                fps=self._fps,
                height=height,
                width=width,
                threads=self._encoder_threads,
            )

            def consume_video(frame: npt.NDArray[np.uint8]) -> None:
                encoder.encode(frame)
                histograms.add(frame)

            worker = FrameWorker(key, consume_video, self._max_pending)
            return _Camera(spec=spec, worker=worker, histograms=histograms, encoder=encoder)
        png_path = self.dir / f"{key}.png-frames"
        png_file = png_path.open("wb")
        spans: list[tuple[int, int]] = []

        def consume_image(frame: npt.NDArray[np.uint8]) -> None:
            data = encode_png(frame)
            spans.append((png_file.tell(), len(data)))
            png_file.write(data)
            histograms.add(frame)

        worker = FrameWorker(key, consume_image, self._max_pending)
        return _Camera(
            spec=spec, worker=worker, histograms=histograms, png_file=png_file, png_path=png_path, png_spans=spans
        )

    def add_frame(self, frame: Mapping[str, Any]) -> None:
        """Add one frame: a value for every feature (FeatureError, and nothing added, when one is wrong).

        A numeric value with NaN or +-inf is wrong too (also when a float64 value overflows float32).
        """
        if self._done:
            raise EpisodeStateError("the episode is already finished")
        features = self._features
        unknown = sorted(set(frame) - set(features))
        if unknown:
            hint = " (the task is given to start_episode, not per frame)" if "task" in unknown else ""
            raise FeatureError(
                f"unknown feature(s) {', '.join(map(repr, unknown))}; the dataset has {', '.join(features)}{hint}"
            )
        missing = [key for key in features if key not in frame]
        if missing:
            raise FeatureError(f"frame lacks feature(s) {', '.join(map(repr, missing))}")
        checked = {key: coerce_value(key, spec, frame[key]) for key, spec in features.items()}
        for key, value in checked.items():
            is_float = key not in self._cameras and isinstance(value, np.ndarray) and value.dtype.kind == "f"
            if is_float and not np.isfinite(value).all():
                raise FeatureError(
                    f"feature {key!r} holds a non-finite value ({value.tolist()}); NaN/inf are never stored "
                    "(LeRobot cannot use their statistics): refuse the sample before it reaches the frame"
                )
        for key, value in checked.items():
            camera = self._cameras.get(key)
            if camera is not None:
                # The caller may reuse its buffer once we return: the worker gets its own copy.
                camera.worker.put(np.array(value, copy=True))
            else:
                self._values[key].append(value)
        self.frames += 1

    def finish(self) -> StagedEpisode:
        """Wait for the encoders, close the files and return the staged episode (abort() on an error)."""
        if self._done:
            raise EpisodeStateError("the episode is already finished")
        try:
            if self.frames == 0:
                raise EpisodeStateError("the episode has no frames; discard it instead")
            cameras: dict[str, StagedCamera] = {}
            for key, camera in self._cameras.items():
                camera.worker.finish()
                if camera.encoder is not None:
                    camera.encoder.finish()
                camera.close()
                cameras[key] = StagedCamera(
                    spec=camera.spec,
                    histograms=camera.histograms.path,
                    mp4=camera.encoder.path if camera.encoder is not None else None,
                    png_path=camera.png_path,
                    png_spans=tuple(camera.png_spans),
                )
        except BaseException:
            self.abort()
            raise
        self._done = True
        return StagedEpisode(
            task=self.task,
            frames=self.frames,
            dir=self.dir,
            codec=self._codec,
            features=self._features,
            values=self._values,
            cameras=cameras,
        )

    def abort(self) -> None:
        """Stop the workers and remove the staging folder (the episode is dropped)."""
        if self._aborted:
            return
        self._aborted = self._done = True
        for camera in self._cameras.values():
            camera.worker.abort()
            if camera.encoder is not None:
                camera.encoder.abort()
            # The files are deleted next: a failed flush (ENOSPC, the usual reason to abort) must not mask the
            # error that made the caller abort.
            with contextlib.suppress(OSError):
                camera.close()
        shutil.rmtree(self.dir, ignore_errors=True)
