"""Training data from a LeRobot v3 dataset: windows, padding masks, decoded cameras, split, statistics.

* `split_episodes` draws the validation episodes with a seed; `training_stats` aggregates the
  per-episode statistics of the training episodes only, so nothing of the validation split leaks into
  the normalisation.
* `PolicyDataset` yields one sample per frame of the chosen episodes: the observation window
  (`n_obs_steps` frames ending at the frame) and the action window, each with `<key>_is_pad` masks
  (LeRobot semantics: positions outside the episode repeat its first/last frame and are flagged).
  Vectors are read once up front. Cameras are decoded a whole episode at a time into a per-process
  cache when all the chosen episodes fit in its byte budget, frame by frame otherwise.
* Samples are addressed as `(frame, draw)` pairs by `StepBatchSampler`, whose order depends only on the
  seed and the step, so a resumed run sees the batches an uninterrupted run would, and augmentation
  draws its randomness from `draw`, not from worker state.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from lerobot_training.errors import FeatureMismatchError, NormalizationError
from lerobot_training.features import ACTION, FeatureType, PolicyFeature, feature_type_of
from lerobot_training.normalize import imagenet_stats, stats_to_tensors
from lerobot_training.policies.config import PolicyConfig
from lerobot_training.relative_actions import RelativeActions, window_offsets
from lerobot_training.transforms import ImageTransforms


def dataset_roots(root: Path | str | Sequence[Path | str]) -> list[Path]:
    """One dataset folder or several, as a list of paths."""
    if isinstance(root, (str, Path)):
        return [Path(root)]
    return [Path(r) for r in root]


def open_reader(root: Path | Sequence[Path]) -> Any:
    """A `DatasetReader` of the project's format module (imported here: training depends on it only for data).

    Several roots give a `DatasetCollection`: one reader over all their episodes, in order.
    """
    from lerobot_dataset import DatasetReader

    roots = dataset_roots(root)
    if len(roots) == 1:
        return DatasetReader(roots[0])
    return DatasetCollection(roots)


class _CollectionMeta:
    def __init__(self, readers: Sequence[Any]) -> None:
        self._readers = readers

    def episode_stats(self, episode: Mapping[str, Any]) -> Any:
        owner = episode["_collection_reader"]
        return self._readers[owner].meta.episode_stats(episode)


class DatasetCollection:
    """Several datasets with the same features and fps read as one: episodes and frames of the first dataset,
    then the second's, and so on (global episode and frame numbers). What the trainer needs of a reader."""

    def __init__(self, roots: Sequence[Path]) -> None:
        from lerobot_dataset import DatasetReader
        from lerobot_dataset.merge import check_compatible

        if len(set(map(str, roots))) != len(roots):
            raise FeatureMismatchError(f"a dataset is given twice: {[str(r) for r in roots]}")
        self.readers = [DatasetReader(Path(r)) for r in roots]
        check_compatible([r.meta for r in self.readers], same_robot_type=False, action="train on")
        self.roots = [Path(r) for r in roots]
        self.root = self.roots[0]  # meta/contract.json and messages: the first dataset's
        self.meta = _CollectionMeta(self.readers)
        self._episodes: list[tuple[int, int]] = []  # global episode -> (reader, local episode)
        self._frame_offsets: list[int] = []
        self.episodes: list[dict[str, Any]] = []
        offset = 0
        for owner, reader in enumerate(self.readers):
            self._frame_offsets.append(offset)
            for local, row in enumerate(reader.episodes):
                self._episodes.append((owner, local))
                self.episodes.append({**row, "_collection_reader": owner})
            offset += len(reader)
        self._length = offset

    @property
    def fps(self) -> int:
        return int(self.readers[0].fps)

    @property
    def features(self) -> dict[str, Any]:
        return dict(self.readers[0].features)

    @property
    def num_episodes(self) -> int:
        return len(self._episodes)

    def __len__(self) -> int:
        return self._length

    def episode_range(self, episode_index: int) -> tuple[int, int]:
        owner, local = self._episodes[episode_index]
        start, end = self.readers[owner].episode_range(local)
        return start + self._frame_offsets[owner], end + self._frame_offsets[owner]

    def episode_frames(self, episode_index: int, key: str) -> Any:
        owner, local = self._episodes[episode_index]
        return self.readers[owner].episode_frames(local, key)

    def __getitem__(self, index: int) -> dict[str, Any]:
        owner = int(np.searchsorted(self._frame_offsets, index, side="right")) - 1
        return dict(self.readers[owner][index - self._frame_offsets[owner]])

    def check_shapes(self) -> None:
        """Every dataset's declared shapes against its data (`DatasetReader.check_shapes`)."""
        for reader in self.readers:
            reader.check_shapes()

    def close(self) -> None:
        for reader in self.readers:
            reader.close()


def dataset_features(
    reader: Any, input_keys: Sequence[str] | None = None
) -> tuple[dict[str, PolicyFeature], dict[str, PolicyFeature]]:
    """Policy input/output features from a dataset's schema.

    Default inputs: `observation.state`, `observation.environment_state` and every camera; `action` is
    the output. Cameras become (3, H, W). Raises FeatureMismatchError naming a missing feature.
    """
    reader.check_shapes()  # the shapes below size the model: info.json's must match the data
    specs = {key: spec for key, spec in reader.features.items() if feature_type_of(key, spec.dtype) is not None}
    if ACTION not in specs:
        raise FeatureMismatchError(f"dataset {reader.root} has no {ACTION!r} feature; policies need it as output")
    if input_keys is None:
        input_keys = [
            key
            for key, spec in specs.items()
            if key in ("observation.state", "observation.environment_state") or spec.dtype in ("video", "image")
        ]
    inputs: dict[str, PolicyFeature] = {}
    for key in input_keys:
        if key not in specs:
            raise FeatureMismatchError(
                f"dataset {reader.root} lacks feature {key!r} that the policy needs (it has {sorted(specs)})"
            )
        inputs[key] = _policy_feature(key, specs[key])
    return inputs, {ACTION: _policy_feature(ACTION, specs[ACTION])}


def _policy_feature(key: str, spec: Any) -> PolicyFeature:
    ftype = feature_type_of(key, spec.dtype)
    assert ftype is not None
    if ftype is FeatureType.VISUAL:
        height, width, channels = spec.shape
        return PolicyFeature(ftype, (channels, height, width))
    names = tuple(spec.names) if spec.names else None
    return PolicyFeature(ftype, tuple(spec.shape), names)


def check_dataset_matches(reader: Any, config: PolicyConfig) -> None:
    """Every feature of `config` exists in the dataset with the same shape (e.g. when fine-tuning a checkpoint)."""
    inputs, outputs = dataset_features(reader, list(config.input_features))
    for key, feature in {**config.input_features, **config.output_features}.items():
        found = {**inputs, **outputs}[key]
        if found.shape != feature.shape:
            raise FeatureMismatchError(
                f"dataset feature {key!r} has shape {found.shape} (cameras as (C, H, W)), the policy expects "
                f"{feature.shape}"
            )


def split_episodes(num_episodes: int, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, val) episode indices: round(fraction * n) validation episodes, but at least one when the fraction
    is positive and there are two episodes or more; training keeps at least one."""
    if num_episodes < 1:
        raise FeatureMismatchError("the dataset has no episodes to train on")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    n_val = min(max(1, round(val_fraction * num_episodes)) if val_fraction > 0 else 0, num_episodes - 1)
    order = np.random.default_rng(seed).permutation(num_episodes)
    return sorted(int(i) for i in order[n_val:]), sorted(int(i) for i in order[:n_val])


def training_stats(
    reader: Any, episodes: Sequence[int], features: Mapping[str, PolicyFeature], *, image_stats: str = "dataset"
) -> dict[str, dict[str, Tensor]]:
    """Normalisation statistics of `features` over `episodes` only (aggregated per-episode stats).

    `image_stats="imagenet"` uses ImageNet's mean/std for cameras (LeRobot's default, for pretrained
    backbones) while keeping the dataset's min/max.
    """
    from lerobot_dataset import stats as stats_mod

    per_episode = []
    for index in episodes:
        stats = reader.meta.episode_stats(reader.episodes[index])
        missing = [key for key in features if key not in stats]
        if missing:
            stats = dict(stats)
            for key in missing:
                if features[key].type is FeatureType.VISUAL:
                    raise NormalizationError(
                        f"episode {index} has no statistics for camera {key!r}; recompute the dataset stats "
                        "or train with --image-stats imagenet"
                    )
                stats[key] = stats_mod.vector_stats(reader.episode_frames(index, key))
        per_episode.append({key: stats[key] for key in features})
    tensors = stats_to_tensors(stats_mod.aggregate(per_episode))
    if image_stats == "imagenet":
        for key, feature in features.items():
            if feature.type is FeatureType.VISUAL:
                tensors[key].update(imagenet_stats())
    elif image_stats != "dataset":
        raise ValueError(f"image_stats must be 'dataset' or 'imagenet', got {image_stats!r}")
    return tensors


def relative_action_stats(
    reader: Any, episodes: Sequence[int], relative: RelativeActions, offsets: Sequence[int]
) -> dict[str, Tensor]:
    """Statistics of the training targets with relative actions, recomputed from the dataset's frames.

    Every (frame t, chunk offset k) pair inside an episode contributes `action[t + k] - state[t]` on the
    relative joints (the action itself on the others), so the normaliser sees the values the policy learns;
    stats.json holds absolute actions and cannot be used.
    """
    from lerobot_dataset import stats as stats_mod

    if relative.state_key not in reader.features:
        raise FeatureMismatchError(
            f"relative actions need the dataset's {relative.state_key!r} feature (action - state at the frame); "
            f"dataset {reader.root} has none"
        )
    per_episode = []
    for index in episodes:
        actions = reader.episode_frames(index, ACTION)
        states = reader.episode_frames(index, relative.state_key)
        values = window_offsets(relative, actions, states, offsets)
        if len(values):
            per_episode.append({ACTION: stats_mod.vector_stats(values)})
    if not per_episode:
        raise NormalizationError("relative actions: the training episodes hold no frames to compute statistics on")
    return stats_to_tensors(stats_mod.aggregate(per_episode))[ACTION]


class _EpisodeFrames:
    """Decoded frames of one camera per episode, least recently used evicted beyond `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._episodes: OrderedDict[tuple[str, int], npt.NDArray[np.uint8]] = OrderedDict()
        self._bytes = 0

    def get(self, key: str, episode: int) -> npt.NDArray[np.uint8] | None:
        frames = self._episodes.get((key, episode))
        if frames is not None:
            self._episodes.move_to_end((key, episode))
        return frames

    def put(self, key: str, episode: int, frames: npt.NDArray[np.uint8]) -> None:
        if frames.nbytes > self.max_bytes:
            return
        self._episodes[(key, episode)] = frames
        self._bytes += frames.nbytes
        while self._bytes > self.max_bytes:
            _, evicted = self._episodes.popitem(last=False)
            self._bytes -= evicted.nbytes


class PolicyDataset(Dataset[dict[str, Tensor]]):
    """Samples (observation window, action window) for the frames of `episodes` (see module docstring).

    Items are dicts of tensors: vectors float32, cameras uint8 (3, H, W) — or (T, ...) with a window —
    `action` (T, A) and `<key>_is_pad` bool masks. Index it with a frame position or a `(position, draw)`
    pair; `draw` seeds the augmentation.
    """

    def __init__(
        self,
        root: Path | Sequence[Path],
        episodes: Sequence[int],
        config: PolicyConfig,
        *,
        augmentation: ImageTransforms | None = None,
        cache_bytes: int = 512 * 2**20,
        cache_episodes: bool = True,
        relative_actions: RelativeActions | None = None,
    ) -> None:
        self.root = dataset_roots(root)
        self.relative_actions = relative_actions
        self.episodes = list(episodes)
        self.input_features = dict(config.input_features)
        self.observation_offsets = config.observation_delta_indices
        self.action_offsets = config.action_delta_indices
        self.windowed_observation = config.n_obs_steps > 1
        self.augmentation = augmentation
        reader = open_reader(self.root)
        check_dataset_matches(reader, config)
        self.fps = reader.fps
        self.camera_keys = [k for k, ft in self.input_features.items() if ft.type is FeatureType.VISUAL]
        self.vector_keys = [k for k in [*self.input_features, ACTION] if k not in self.camera_keys]
        if relative_actions is not None and relative_actions.state_key not in self.vector_keys:
            self.vector_keys.append(relative_actions.state_key)
        self._vectors: dict[str, dict[int, npt.NDArray[np.float32]]] = {key: {} for key in self.vector_keys}
        positions: list[tuple[int, int, int]] = []
        for episode in self.episodes:
            start, end = reader.episode_range(episode)
            positions.extend((episode, frame, end - start) for frame in range(end - start))
            for key in self.vector_keys:
                self._vectors[key][episode] = reader.episode_frames(episode, key).astype(np.float32)
        reader.close()
        decoded_bytes = len(positions) * sum(int(np.prod(self.input_features[k].shape)) for k in self.camera_keys)
        # Whole-episode decoding pays off only when every episode stays cached; with random sampling over
        # more episodes than fit, each sample would decode a whole episode again.
        self.cache_episodes = cache_episodes and decoded_bytes <= cache_bytes
        self._positions = positions
        self._cache = _EpisodeFrames(cache_bytes)
        self._reader: Any = None
        self.decode_seconds = 0.0

    def __len__(self) -> int:
        return len(self._positions)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = None  # readers hold open files; each worker opens its own
        state["_cache"] = _EpisodeFrames(self._cache.max_bytes)
        return state

    def _camera_frames(self, key: str, episode: int, frames: list[int]) -> npt.NDArray[np.uint8]:
        if self._reader is None:
            self._reader = open_reader(self.root)
        started = time.perf_counter()
        try:
            if self.cache_episodes:
                cached = self._cache.get(key, episode)
                if cached is None:
                    cached = self._reader.episode_frames(episode, key)
                    self._cache.put(key, episode, cached)
                return np.stack([cached[f] for f in frames])
            start, _ = self._reader.episode_range(episode)
            return np.stack([self._reader[start + f][key] for f in frames])
        finally:
            self.decode_seconds += time.perf_counter() - started

    @staticmethod
    def _window(frame: int, length: int, offsets: Sequence[int]) -> tuple[list[int], npt.NDArray[np.bool_]]:
        rows = [min(max(frame + k, 0), length - 1) for k in offsets]
        pad = np.array([not 0 <= frame + k < length for k in offsets], dtype=bool)
        return rows, pad

    def __getitem__(self, index: int | tuple[int, int]) -> dict[str, Tensor]:
        position, draw = index if isinstance(index, tuple) else (index, index)
        episode, frame, length = self._positions[position]
        item: dict[str, Tensor] = {}
        obs_rows, obs_pad = self._window(frame, length, self.observation_offsets)
        if not self.windowed_observation:
            obs_rows, obs_pad = [frame], np.zeros(1, dtype=bool)
        for key in self.vector_keys:
            if key == ACTION or key not in self.input_features:
                continue
            values = torch.from_numpy(self._vectors[key][episode][obs_rows])
            item[key] = values if self.windowed_observation else values[0]
        generator = torch.Generator().manual_seed(int(draw)) if self.augmentation is not None else None
        for key in self.camera_keys:
            frames = torch.from_numpy(self._camera_frames(key, episode, obs_rows)).permute(0, 3, 1, 2)
            if self.augmentation is not None and generator is not None:
                frames = self.augmentation(frames, generator)
            item[key] = frames if self.windowed_observation else frames[0]
        if self.windowed_observation:
            for key in self.input_features:
                item[f"{key}_is_pad"] = torch.from_numpy(obs_pad)
        action_rows, action_pad = self._window(frame, length, self.action_offsets)
        actions = self._vectors[ACTION][episode][action_rows]
        if self.relative_actions is not None:  # offsets from the state at this frame, for the whole window
            state = self._vectors[self.relative_actions.state_key][episode][frame]
            actions = self.relative_actions.to_relative(actions, state).astype(np.float32)
        item[ACTION] = torch.from_numpy(actions)
        item[f"{ACTION}_is_pad"] = torch.from_numpy(action_pad)
        return item


class StepBatchSampler(Sampler[list[tuple[int, int]]]):
    """Batches of `(position, draw)` for steps `start_step, start_step + 1, ...` up to `total_steps`.

    Positions run through a fresh seeded permutation each epoch; `draw` is the sample's global serial
    number mixed with the seed, so step k's batch is a function of (seed, k) alone.

    With `world_size` ranks, step k's global batch has `batch_size * world_size` samples (the batch one
    process at that size draws) and rank r gets its r-th slice of `batch_size`.
    """

    def __init__(
        self, size: int, batch_size: int, seed: int, start_step: int, total_steps: int, rank: int = 0,
        world_size: int = 1,
    ) -> None:  # fmt: skip
        if size < 1:
            raise ValueError("cannot sample batches from an empty dataset")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not within world_size {world_size}")
        self.size = size
        self.batch_size = batch_size
        self.seed = seed
        self.start_step = start_step
        self.total_steps = total_steps
        self.rank = rank
        self.world_size = world_size

    def __len__(self) -> int:
        return max(0, self.total_steps - self.start_step)

    def _permutation(self, epoch: int) -> npt.NDArray[np.int64]:
        return np.random.default_rng([self.seed, epoch]).permutation(self.size)

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        cached_epoch, permutation = -1, np.empty(0, dtype=np.int64)
        global_batch = self.batch_size * self.world_size
        first = self.rank * self.batch_size
        for step in range(self.start_step, self.total_steps):
            batch = []
            for j in range(first, first + self.batch_size):
                serial = step * global_batch + j
                epoch, offset = divmod(serial, self.size)
                if epoch != cached_epoch:
                    cached_epoch, permutation = epoch, self._permutation(epoch)
                batch.append((int(permutation[offset]), (self.seed * 1_000_003 + serial) % 2**63))
            yield batch


def to_policy_batch(batch: Mapping[str, Tensor], camera_keys: Sequence[str], device: torch.device) -> dict[str, Tensor]:
    """Move a collated batch to `device`, cameras to float in [0, 1]."""
    out = {}
    for key, value in batch.items():
        moved = value.to(device, non_blocking=True)
        out[key] = moved.float() / 255.0 if key in camera_keys else moved
    return out
