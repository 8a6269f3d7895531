"""Per-episode and dataset statistics, computed as LeRobot 0.4.4 computes them.

Vectors: min/max/mean/std over the episode's frames, quantiles q01..q99 from a 5000-bin
histogram spanning [min, max] with linear interpolation inside the bin (LeRobot's
`RunningQuantileStats` fed the whole episode at once); fewer than 2 frames give quantiles
equal to the mean.

Cameras: LeRobot samples `estimate_num_samples(n)` frames of the episode, strides them down
when the longer side is >= 300 px, and reduces over (frames, height, width) per channel,
dividing by 255. Pixel values are integers, so one 256-bin count histogram per channel and
frame holds everything those statistics need: `CameraHistograms` keeps these (3 KiB per
frame, spilled to a file so memory stays flat however long the episode) and the sampled
frames' histograms are summed at the end. Our `std` is the true standard deviation;
LeRobot 0.4.4 squares uint8 pixels without widening, which wraps around and leaves the
camera `std` at 0 in practice.

Dataset level: min of minima, max of maxima, count-weighted mean, pooled std and
count-weighted mean of the episode quantiles (LeRobot's `aggregate_stats`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

QUANTILES: tuple[float, ...] = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS: tuple[str, ...] = tuple(f"q{int(q * 100):02d}" for q in QUANTILES)
STAT_KEYS: tuple[str, ...] = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)
NUM_QUANTILE_BINS = 5000

FeatureStats = dict[str, npt.NDArray[Any]]
EpisodeStats = dict[str, FeatureStats]


def estimate_num_samples(length: int, min_samples: int = 100, max_samples: int = 10_000, power: float = 0.75) -> int:
    """How many frames of an episode of `length` frames LeRobot samples for camera statistics."""
    min_samples = min(min_samples, length)
    return max(min_samples, min(int(length**power), max_samples))


def sample_indices(length: int) -> list[int]:
    """The frame indices LeRobot samples for camera statistics."""
    count = estimate_num_samples(length)
    indices: list[int] = np.round(np.linspace(0, length - 1, count)).astype(int).tolist()
    return indices


def downsample_stride(height: int, width: int, target_size: int = 150, threshold: int = 300) -> int:
    """Stride LeRobot applies to both image axes before computing statistics (1 = none)."""
    if max(height, width) < threshold:
        return 1
    return int(width / target_size) if width > height else int(height / target_size)


def _histogram_quantiles(counts: npt.NDArray[np.float64], edges: npt.NDArray[np.float64], total: float) -> list[float]:
    cumsum = np.cumsum(counts)
    values: list[float] = []
    for q in QUANTILES:
        target = q * total
        idx = int(np.searchsorted(cumsum, target))
        if idx == 0:
            values.append(float(edges[0]))
        elif idx >= len(cumsum):
            values.append(float(edges[-1]))
        else:
            before = cumsum[idx - 1]
            in_bin = cumsum[idx] - before
            if in_bin == 0:
                values.append(float(edges[idx]))
            else:
                values.append(float(edges[idx] + (target - before) / in_bin * (edges[idx + 1] - edges[idx])))
    return values


def _quantiles_of_column(
    column: npt.NDArray[Any], lo: Any, hi: Any, weights: npt.NDArray[Any] | None = None
) -> list[float]:
    # Edges in the data's own precision (numpy scalars, as LeRobot passes them): values that sit
    # exactly on a bin edge, like timestamps, then fall into the same bin as in LeRobot.
    edges = np.linspace(lo - 1e-10, hi + 1e-10, NUM_QUANTILE_BINS + 1)
    counts, _ = np.histogram(column, bins=edges, weights=weights)
    total = float(column.size if weights is None else weights.sum())
    return _histogram_quantiles(counts.astype(np.float64), edges, total)


def vector_stats(values: npt.NDArray[Any]) -> FeatureStats:
    """Statistics of an episode's vector feature; `values` has shape (frames, dim)."""
    data = values.reshape(values.shape[0], -1)
    count = data.shape[0]
    stats: FeatureStats = {
        "min": np.min(data, axis=0),
        "max": np.max(data, axis=0),
        "count": np.array([count], dtype=np.int64),
    }
    as_float = data.astype(np.float64)
    mean = np.mean(as_float, axis=0)
    stats["mean"] = mean
    if count < 2:
        stats["std"] = np.std(as_float, axis=0)
        for key in QUANTILE_KEYS:
            stats[key] = mean.copy()
        return stats
    stats["std"] = np.sqrt(np.maximum(0.0, np.mean(as_float**2, axis=0) - mean**2))
    columns = []
    for i in range(data.shape[1]):
        column = data[:, i] if data.dtype.kind == "f" else as_float[:, i]
        columns.append(_quantiles_of_column(column, column.min(), column.max()))
    for qi, key in enumerate(QUANTILE_KEYS):
        stats[key] = np.array([col[qi] for col in columns], dtype=np.float64)
    return stats


def frame_histogram(frame: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """Per-channel 256-bin value counts of an (H, W, 3) frame after LeRobot's stride downsampling."""
    stride = downsample_stride(frame.shape[0], frame.shape[1])
    small = frame[::stride, ::stride]
    hist = np.empty((3, 256), dtype=np.uint32)
    for c in range(3):
        hist[c] = np.bincount(small[:, :, c].ravel(), minlength=256)
    return hist


def camera_stats_from_histograms(histograms: npt.NDArray[Any], frames_sampled: int) -> FeatureStats:
    """Camera statistics in [0, 1], shape (3, 1, 1), from summed per-channel histograms (3, 256)."""
    counts = histograms.astype(np.float64)
    values = np.arange(256, dtype=np.float64)
    stats: FeatureStats = {}
    mins, maxs, means, stds = [], [], [], []
    quantiles: list[list[float]] = []
    for c in range(3):
        present = np.nonzero(counts[c])[0]
        lo, hi = float(present[0]), float(present[-1])
        total = counts[c].sum()
        mean = float((counts[c] * values).sum() / total)
        var = float((counts[c] * (values - mean) ** 2).sum() / total)
        mins.append(lo)
        maxs.append(hi)
        means.append(mean)
        stds.append(np.sqrt(var))
        if total < 2:
            quantiles.append([mean] * len(QUANTILES))
        else:
            quantiles.append(_quantiles_of_column(values, np.float64(lo), np.float64(hi), weights=counts[c]))

    def channels(xs: Sequence[float]) -> npt.NDArray[np.float64]:
        return (np.asarray(xs, dtype=np.float64) / 255.0).reshape(3, 1, 1)

    stats["min"] = channels(mins)
    stats["max"] = channels(maxs)
    stats["mean"] = channels(means)
    stats["std"] = channels(stds)
    stats["count"] = np.array([frames_sampled], dtype=np.int64)
    for qi, key in enumerate(QUANTILE_KEYS):
        stats[key] = channels([q[qi] for q in quantiles])
    return stats


def histogram_file_stats(path: Path, frames: int) -> FeatureStats:
    """Camera statistics over LeRobot's sample of the first `frames` histograms spilled to `path`.

    Only the sampled rows are read (~900 of a 9000-frame episode): mapping the file made all of it resident
    (3 kB per frame), so the peak memory of a commit grew with the episode's length.
    """
    if frames == 0:
        raise ValueError("no frames recorded")
    row_bytes = CameraHistograms.ROW_BYTES
    indices = sample_indices(frames)
    summed = np.zeros((3, 256), dtype=np.float64)
    with path.open("rb") as file:
        for i in indices:  # a frame sampled twice counts twice, as in LeRobot
            file.seek(i * row_bytes)
            row = file.read(row_bytes)
            if len(row) != row_bytes:
                raise ValueError(f"{path} holds fewer than the {frames} frame histograms recorded")
            summed += np.frombuffer(row, dtype=np.uint32).reshape(3, 256)
    return camera_stats_from_histograms(summed, len(indices))


class CameraHistograms:
    """Per-frame channel histograms of one camera for one episode, spilled to `path`."""

    ROW_BYTES = 3 * 256 * 4

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file = path.open("wb")
        self._frames = 0

    @property
    def frames(self) -> int:
        return self._frames

    def add(self, frame: npt.NDArray[np.uint8]) -> None:
        """Record one (H, W, 3) uint8 frame."""
        self._file.write(frame_histogram(frame).tobytes())
        self._frames += 1

    @property
    def path(self) -> Path:
        return self._path

    def stats(self) -> FeatureStats:
        """Statistics over LeRobot's sample of the frames recorded so far."""
        self._file.flush()
        return histogram_file_stats(self._path, self._frames)

    def close(self) -> None:
        self._file.close()


def aggregate_feature(stats_list: Sequence[Mapping[str, npt.NDArray[Any]]]) -> FeatureStats:
    """Combine one feature's per-episode statistics into dataset statistics."""
    means = np.stack([np.asarray(s["mean"], dtype=np.float64) for s in stats_list])
    variances = np.stack([np.asarray(s["std"], dtype=np.float64) ** 2 for s in stats_list])
    counts = np.stack([np.asarray(s["count"]) for s in stats_list])
    total = counts.sum(axis=0)
    while counts.ndim < means.ndim:
        counts = np.expand_dims(counts, axis=-1)
    mean = (means * counts).sum(axis=0) / total
    variance = ((variances + (means - mean) ** 2) * counts).sum(axis=0) / total
    out: FeatureStats = {
        "min": np.min(np.stack([np.asarray(s["min"]) for s in stats_list]), axis=0),
        "max": np.max(np.stack([np.asarray(s["max"]) for s in stats_list]), axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": total,
    }
    for key in QUANTILE_KEYS:
        if all(key in s for s in stats_list):
            q = np.stack([np.asarray(s[key], dtype=np.float64) for s in stats_list])
            out[key] = (q * counts).sum(axis=0) / total
    return out


def aggregate(episodes: Iterable[Mapping[str, Mapping[str, npt.NDArray[Any]]]]) -> EpisodeStats:
    """Dataset statistics from per-episode statistics (features missing in some episodes are skipped there)."""
    episodes = list(episodes)
    keys: list[str] = []
    for ep in episodes:
        keys.extend(k for k in ep if k not in keys)
    return {key: aggregate_feature([ep[key] for ep in episodes if key in ep]) for key in keys}


def to_json(stats: Mapping[str, Mapping[str, npt.NDArray[Any]]]) -> dict[str, dict[str, Any]]:
    """Nested lists as LeRobot writes them to stats.json (bool min/max stay booleans)."""
    return {key: {name: np.asarray(value).tolist() for name, value in ft.items()} for key, ft in stats.items()}


def from_json(data: Mapping[str, Mapping[str, Any]]) -> EpisodeStats:
    """Inverse of `to_json`."""
    return {key: {name: np.asarray(value) for name, value in ft.items()} for key, ft in data.items()}
