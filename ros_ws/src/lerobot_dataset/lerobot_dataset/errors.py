"""Typed errors of the LeRobot v3 dataset format module.

Every error message names what is wrong and how to fix it. All errors derive from
`DatasetError`, so callers that do not care about the kind catch that one.
"""

from __future__ import annotations


class DatasetError(Exception):
    """Base class of every error raised by `lerobot_dataset`."""


class FeatureError(DatasetError, ValueError):
    """A feature declaration or a frame value does not fit the schema (shape, dtype, unknown key)."""


class SchemaMismatchError(DatasetError):
    """The dataset on disk holds a different schema than the caller expects."""


class DatasetExistsError(DatasetError, FileExistsError):
    """`DatasetWriter.create` was pointed at a root that already exists."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The root holds no LeRobot v3 dataset (no meta/info.json)."""


class DatasetFormatError(DatasetError):
    """A file of the dataset is missing, unreadable or inconsistent with the rest."""


class EpisodeStateError(DatasetError, RuntimeError):
    """A writer call came in the wrong order (e.g. `add_frame` before `start_episode`)."""


class EncoderError(DatasetError, RuntimeError):
    """The video encoder failed; the episode being recorded cannot be saved."""


class DecoderError(DatasetError, RuntimeError):
    """A video frame could not be decoded at the requested timestamp."""
