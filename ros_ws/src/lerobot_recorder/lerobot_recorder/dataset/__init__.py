"""LeRobot v3.0 dataset format: a writer with atomic episode commits, a reader, and a validator.

Pure Python (no rclpy); used by the recorder node, the bag converter and training.

    from lerobot_recorder.dataset import DatasetWriter, DatasetReader, FeatureSpec, DatasetError, feature_specs
    from lerobot_recorder.dataset import merge_datasets, select_episodes, split_dataset  # collections
"""

from lerobot_recorder.dataset.commit import recover
from lerobot_recorder.dataset.errors import (
    DatasetError,
    DatasetExistsError,
    DatasetFormatError,
    DatasetNotFoundError,
    DecoderError,
    EncoderError,
    EpisodeStateError,
    FeatureError,
    SchemaMismatchError,
)
from lerobot_recorder.dataset.features import FeatureSpec, feature_specs
from lerobot_recorder.dataset.merge import MergeReport, merge_datasets, select_episodes, split_dataset
from lerobot_recorder.dataset.reader import DatasetReader
from lerobot_recorder.dataset.writer import DatasetWriter

__all__ = [
    "DatasetError",
    "DatasetExistsError",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "DatasetReader",
    "DatasetWriter",
    "DecoderError",
    "EncoderError",
    "EpisodeStateError",
    "FeatureError",
    "FeatureSpec",
    "MergeReport",
    "SchemaMismatchError",
    "feature_specs",
    "merge_datasets",
    "recover",
    "select_episodes",
    "split_dataset",
]
