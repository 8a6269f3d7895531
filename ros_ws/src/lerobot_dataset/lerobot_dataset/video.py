"""Video encoding (streaming, one thread per camera), mp4 concatenation and frame decoding (PyAV).

Encoder settings are named (`VIDEO_ENCODINGS`; the name is what `video_codec` / `--codec` take):
`libsvtav1` and `h264` are LeRobot 0.4.4's (yuv420p, g=2, crf=30; SVT-AV1 preset 12, libx264's default
preset medium); `h264-ultrafast` is libx264's fastest preset at the same crf and GOP, one encoder thread per
camera (measured choice for offline conversion, see the package README). `DatasetWriter.encoder_threads` caps
an encoder's threads (`encoder_thread_options`); left to their defaults, SVT-AV1 and libx264 start threads
for every core of the machine per camera. Episodes are encoded to their own
mp4 in the staging folder while they are recorded, then appended to the camera's dataset file by a stream
copy (no re-encoding), as LeRobot's concat demuxer does -- only when both streams have the same parameters
(`same_stream`), otherwise the episode starts a new file.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import numpy.typing as npt

from lerobot_dataset.errors import DecoderError, EncoderError

PIX_FMT = "yuv420p"
GOP = 2
CRF = 30
SVTAV1_PRESET = 12


@dataclass(frozen=True)
class VideoEncoding:
    """A named set of encoder settings: what `DatasetWriter(video_codec=...)` and `--codec` take."""

    name: str
    encoder: str  # FFmpeg encoder
    codec: str  # the stream's codec, as info.json's `video.codec` names it
    options: Mapping[str, str]
    threads: int | None  # encoder threads per camera; None: FFmpeg's default
    description: str


VIDEO_ENCODINGS: dict[str, VideoEncoding] = {
    enc.name: enc
    for enc in (
        VideoEncoding(
            "libsvtav1",
            "libsvtav1",
            "av1",
            {"g": str(GOP), "crf": str(CRF), "preset": str(SVTAV1_PRESET)},
            None,
            "LeRobot 0.4.4's default: SVT-AV1 preset 12, crf 30, g 2",
        ),
        VideoEncoding(
            "h264",
            "libx264",
            "h264",
            {"g": str(GOP), "crf": str(CRF)},
            None,
            "LeRobot 0.4.4's h264: libx264 preset medium, crf 30, g 2",
        ),
        VideoEncoding(
            "h264-ultrafast",
            "libx264",
            "h264",
            {"g": str(GOP), "crf": str(CRF), "preset": "ultrafast"},
            1,
            "libx264 preset ultrafast, crf 30, g 2, one thread per camera",
        ),
    )
}
# Encoding name -> the codec info.json declares.
VIDEO_CODECS: dict[str, str] = {name: enc.codec for name, enc in VIDEO_ENCODINGS.items()}
# The codec info.json declares -> the encoding used when appending without naming one (LeRobot's).
LEROBOT_ENCODING: dict[str, str] = {"av1": "libsvtav1", "h264": "h264"}


def video_encoding(name: str) -> VideoEncoding:
    """The encoder settings called `name`; EncoderError for an unknown name."""
    try:
        return VIDEO_ENCODINGS[name]
    except KeyError:
        raise EncoderError(f"video codec {name!r} is not supported; use one of {', '.join(VIDEO_ENCODINGS)}") from None


def codec_options(codec: str) -> dict[str, str]:
    """FFmpeg encoder options of the encoding called `codec`."""
    return dict(video_encoding(codec).options)


def encoder_thread_options(encoding: VideoEncoding, threads: int | None) -> tuple[dict[str, str], int | None]:
    """(FFmpeg options, codec thread count) of `encoding` with at most `threads` threads per encoder (None: the
    encoding's own setting). SVT-AV1 takes its parallelism as `lp` in `svtav1-params` (FFmpeg does not pass
    the thread count on). With lp above 1 (its default is the machine's cores) the process's heap grows 1-3 kB
    per encoded 640x480 frame all episode long (its threads' glibc arenas; a third of that with one arena);
    with lp=1 it stays flat (measured over 9000 frames)."""
    options = dict(encoding.options)
    if threads is None:
        return options, encoding.threads
    if threads < 1:
        raise ValueError(f"encoder threads must be >= 1, got {threads}")
    if encoding.encoder == "libsvtav1":
        params = [p for p in options.get("svtav1-params", "").split(":") if p and not p.startswith("lp=")]
        options["svtav1-params"] = ":".join([*params, f"lp={threads}"])
        return options, encoding.threads
    return options, min(threads, encoding.threads or threads)


def check_frame_size(codec: str, height: int, width: int) -> None:
    """Raise EncoderError when `codec` cannot encode (height, width) frames in yuv420p."""
    if video_encoding(codec).codec == "h264" and (height % 2 or width % 2):
        raise EncoderError(
            f"h264 in yuv420p needs an even frame height and width, got {height}x{width}; "
            "use libsvtav1, crop the frames, or store the camera as an 'image' feature"
        )


# RGB -> Y'CbCr, BT.601 limited range (what FFmpeg's swscale uses for rgb24 -> yuv420p by default), with offsets.
_RGB_TO_YUV = np.array(
    [
        [0.256788, 0.504129, 0.097906, 16.0],
        [-0.148223, -0.290993, 0.439216, 128.0],
        [0.439216, -0.367788, -0.071427, 128.0],
    ]
)


def rgb_to_yuv420p(frame: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """An (H, W, 3) RGB frame of even size as yuv420p planes, (H * 3 / 2, W): Y, then U, then V.

    OpenCV, at a third of swscale's CPU, releasing the GIL: luma within one level of swscale's, chroma the mean
    of each 2x2 block (swscale's filter differs only on sharp colour edges, by a few levels).
    """
    height, width = frame.shape[:2]
    yuv = cv2.transform(frame, _RGB_TO_YUV)
    chroma = cv2.resize(yuv, (width // 2, height // 2), interpolation=cv2.INTER_AREA)
    plane = height * width
    out = np.empty(plane * 3 // 2, dtype=np.uint8)
    out[:plane].reshape(height, width)[...] = yuv[:, :, 0]
    out[plane : plane + plane // 4].reshape(height // 2, width // 2)[...] = chroma[:, :, 1]
    out[plane + plane // 4 :].reshape(height // 2, width // 2)[...] = chroma[:, :, 2]
    return out.reshape(height * 3 // 2, width)


class EpisodeVideoEncoder:
    """Encodes one camera's frames of one episode into an mp4 file, synchronously.

    Frames of even size are converted to yuv420p by `rgb_to_yuv420p`, others by the encoder's swscale.
    `threads` caps the encoder's threads (`encoder_thread_options`; None: the encoding's default).
    """

    def __init__(
        self, path: Path, *, codec: str, fps: int, height: int, width: int, threads: int | None = None
    ) -> None:
        self.path = path
        self.frames = 0
        self._convert_with_opencv = height % 2 == 0 and width % 2 == 0
        # SVT-AV1 prints its configuration and warnings to stderr; keep errors only.
        os.environ.setdefault("SVT_LOG", "1")
        encoding = video_encoding(codec)
        options, thread_count = encoder_thread_options(encoding, threads)
        self.options, self.thread_count = options, thread_count  # what the encoder was opened with
        try:
            self._container: Any = av.open(str(path), mode="w", format="mp4")
            stream: Any = self._container.add_stream(encoding.encoder, rate=fps, options=options)
            stream.width = width
            stream.height = height
            stream.pix_fmt = PIX_FMT
            if thread_count is not None:
                stream.codec_context.thread_count = thread_count
            self._stream: Any = stream
        except (av.FFmpegError, ValueError) as err:
            raise EncoderError(f"cannot start the {codec} encoder for {path.name}: {err}") from None

    def encode(self, frame: npt.NDArray[np.uint8]) -> None:
        if self._convert_with_opencv:
            video_frame = av.VideoFrame.from_ndarray(rgb_to_yuv420p(frame), format=PIX_FMT)
        else:
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
        for packet in self._stream.encode(video_frame):
            self._container.mux(packet)
        self.frames += 1

    def finish(self) -> None:
        """Flush the encoder and close the file."""
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()

    def abort(self) -> None:
        """Close the file without flushing; the episode's mp4 is discarded anyway."""
        with contextlib.suppress(av.FFmpegError):
            self._container.close()


class FrameWorker:
    """A thread that feeds frames from a bounded queue to `consume`; errors surface on the caller's side.

    `put` blocks when `max_pending` frames wait (back-pressure instead of unbounded memory).
    An exception in `consume` stops the worker; the next `put` or `finish` raises EncoderError.
    """

    _STOP = object()

    def __init__(self, name: str, consume: Callable[[npt.NDArray[np.uint8]], None], max_pending: int = 64) -> None:
        self._consume = consume
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_pending)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"frames-{name}", daemon=True)
        self._name = name
        self._thread.start()

    @property
    def pending(self) -> int:
        """Frames queued but not yet consumed (the encode lag in frames)."""
        return self._queue.qsize()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is self._STOP:
                return
            if self._error is not None:
                continue  # drain so that producers never block on a dead worker
            try:
                self._consume(item)  # type: ignore[arg-type]
            except Exception as err:
                self._error = err

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise EncoderError(f"the frame worker for {self._name!r} failed: {self._error}") from self._error

    def put(self, frame: npt.NDArray[np.uint8]) -> None:
        self._raise_if_failed()
        while True:
            try:
                self._queue.put(frame, timeout=0.5)
                return
            except queue.Full:
                self._raise_if_failed()
                if not self._thread.is_alive():
                    raise EncoderError(f"the frame worker for {self._name!r} stopped") from None

    def finish(self) -> None:
        """Wait until every queued frame is consumed; raises EncoderError if any failed."""
        self._queue.put(self._STOP)
        self._thread.join()
        self._raise_if_failed()

    def abort(self) -> None:
        """Stop without raising (the episode is being discarded)."""
        self._error = self._error or EncoderError("aborted")
        self._queue.put(self._STOP)
        self._thread.join()


@dataclass(frozen=True)
class VideoProbe:
    codec: str
    pix_fmt: str
    width: int
    height: int
    fps: float
    frames: int
    duration_s: float


def probe(path: Path) -> VideoProbe:
    """Codec, size, rate, packet count and duration of the first video stream of `path`."""
    try:
        container: Any = av.open(str(path))
    except av.FFmpegError as err:
        raise DecoderError(f"cannot read video {path}: {err}") from None
    try:
        stream = container.streams.video[0]
        frames = 0
        last_end = 0
        for packet in container.demux(stream):
            if packet.pts is None:
                continue
            frames += 1
            last_end = max(last_end, packet.pts + (packet.duration or 0))
        time_base = stream.time_base or Fraction(1, 1)
        rate = stream.average_rate or stream.base_rate or 0
        return VideoProbe(
            codec=stream.codec_context.codec.canonical_name,
            pix_fmt=stream.codec_context.pix_fmt or "",
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            fps=float(rate),
            frames=frames,
            duration_s=float(last_end * time_base),
        )
    except (av.FFmpegError, IndexError) as err:
        raise DecoderError(f"cannot read video {path}: {err}") from None
    finally:
        container.close()


def stream_parameters(path: Path) -> tuple[str, int, int, str, bytes]:
    """Codec, width, height, pixel format and extradata (decoder setup) of the first video stream of `path`."""
    try:
        container: Any = av.open(str(path))
    except av.FFmpegError as err:
        raise DecoderError(f"cannot read video {path}: {err}") from None
    try:
        ctx = container.streams.video[0].codec_context
        return (ctx.codec.canonical_name, ctx.width, ctx.height, ctx.pix_fmt or "", bytes(ctx.extradata or b""))
    except IndexError:
        raise DecoderError(f"{path} holds no video stream") from None
    finally:
        container.close()


def same_stream(a: Path, b: Path) -> bool:
    """True when `b` can be stream-copied after `a` into one mp4: same codec, size, format and decoder setup.

    Different encoder settings of one codec (libx264 presets) give different extradata (SPS/PPS); an mp4
    holds one, so such episodes go to separate files.
    """
    return stream_parameters(a) == stream_parameters(b)


def frame_times(path: Path) -> npt.NDArray[np.float64]:
    """Presentation times in seconds of every video packet of `path`, sorted (no decoding)."""
    try:
        container: Any = av.open(str(path))
    except av.FFmpegError as err:
        raise DecoderError(f"cannot read video {path}: {err}") from None
    try:
        stream = container.streams.video[0]
        time_base = stream.time_base or Fraction(1, 1)
        pts = [packet.pts for packet in container.demux(stream) if packet.pts is not None]
        return np.sort(np.asarray(pts, dtype=np.float64) * float(time_base))
    except (av.FFmpegError, IndexError) as err:
        raise DecoderError(f"cannot read video {path}: {err}") from None
    finally:
        container.close()


def concatenate(inputs: Sequence[Path], output: Path) -> None:
    """Stream-copy `inputs` (same codec, size and rate) one after the other into `output` (faststart mp4)."""
    try:
        with av.open(str(output), mode="w", format="mp4", options={"movflags": "faststart"}) as out:
            out_stream: Any = None
            offset_s = Fraction(0)
            for path in inputs:
                with av.open(str(path)) as inp:
                    in_stream = inp.streams.video[0]
                    if out_stream is None:
                        out_stream = out.add_stream_from_template(in_stream, opaque=True)
                        out_stream.time_base = in_stream.time_base
                    time_base = in_stream.time_base or Fraction(1, 1)
                    shift = round(offset_s / time_base)
                    end = 0
                    for packet in inp.demux(in_stream):
                        if packet.dts is None:
                            continue
                        end = max(end, (packet.pts or 0) + (packet.duration or 0))
                        packet.pts = (packet.pts or 0) + shift
                        packet.dts = packet.dts + shift
                        packet.stream = out_stream
                        out.mux(packet)
                    offset_s += end * time_base
    except av.FFmpegError as err:
        raise EncoderError(f"cannot concatenate videos into {output}: {err}") from None


class _OpenVideo:
    def __init__(self, path: Path) -> None:
        self.container: Any = av.open(str(path))
        self.stream: Any = self.container.streams.video[0]
        self.stream.thread_type = "AUTO"
        self.time_base: Fraction = self.stream.time_base or Fraction(1, 1)
        self.next_frames: Any = None  # iterator positioned after the last decoded frame
        self.last_time = -1.0

    def close(self) -> None:
        self.container.close()


class VideoDecoder:
    """Decodes frames by timestamp from a small LRU cache of open mp4 files."""

    def __init__(self, max_open: int = 8, tolerance_s: float = 1e-4) -> None:
        self._open: OrderedDict[Path, _OpenVideo] = OrderedDict()
        self._pid = os.getpid()
        self._max_open = max_open
        self.tolerance_s = tolerance_s

    def _get(self, path: Path) -> _OpenVideo:
        if os.getpid() != self._pid:
            # A forked child (e.g. a DataLoader worker) must not share the parent's demuxer state.
            self._open = OrderedDict()
            self._pid = os.getpid()
        video = self._open.pop(path, None)
        if video is None:
            try:
                video = _OpenVideo(path)
            except (av.FFmpegError, IndexError) as err:
                raise DecoderError(f"cannot open video {path}: {err}") from None
            while len(self._open) >= self._max_open:
                _, old = self._open.popitem(last=False)
                old.close()
        self._open[path] = video
        return video

    def frame_at(self, path: Path, time_s: float) -> npt.NDArray[np.uint8]:
        """The (H, W, 3) uint8 RGB frame whose timestamp is within tolerance of `time_s`."""
        video = self._get(path)
        # Reads a little ahead of the last decoded frame continue decoding; anything else seeks.
        ahead = video.next_frames is not None and video.last_time + self.tolerance_s < time_s <= video.last_time + 1.0
        if ahead:
            frame = self._decode_until(video, time_s)
            if frame is not None:
                return frame
        target = round(time_s / video.time_base)
        try:
            video.container.seek(target, stream=video.stream, backward=True, any_frame=False)
        except av.FFmpegError as err:
            raise DecoderError(f"{path}: cannot seek to {time_s:.6f} s: {err}") from None
        video.next_frames = video.container.decode(video.stream)
        video.last_time = -1.0
        frame = self._decode_until(video, time_s)
        if frame is None:
            raise DecoderError(
                f"{path}: no frame at {time_s:.6f} s (nearest decoded {video.last_time:.6f} s); "
                "timestamps and video frames disagree"
            )
        return frame

    def _decode_until(self, video: _OpenVideo, time_s: float) -> npt.NDArray[np.uint8] | None:
        """Decode forward to the frame at `time_s`; None when the stream passes it or ends first."""
        try:
            for frame in video.next_frames:
                t = float(frame.pts * video.time_base)
                video.last_time = t
                if t < time_s - self.tolerance_s:
                    continue
                if t > time_s + self.tolerance_s:
                    return None
                result: npt.NDArray[np.uint8] = frame.to_ndarray(format="rgb24")
                return result
        except av.FFmpegError as err:
            video.next_frames = None
            raise DecoderError(f"decoding failed near {time_s:.6f} s: {err}") from None
        video.next_frames = None
        return None

    def close(self) -> None:
        for video in self._open.values():
            video.close()
        self._open.clear()
