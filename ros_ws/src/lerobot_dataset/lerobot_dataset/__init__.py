"""LeRobot v3.0 dataset format: a writer with atomic episode commits, a reader, and a validator.

Pure Python (no rclpy); used by the recorder node, the bag converter and training.

    from lerobot_dataset import DatasetWriter, DatasetReader, FeatureSpec, DatasetError, feature_specs
    from lerobot_dataset import merge_datasets, select_episodes, split_dataset  # collections
"""

from lerobot_dataset.commit import recover
from lerobot_dataset.errors import (
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
from lerobot_dataset.features import FeatureSpec, feature_specs
from lerobot_dataset.merge import MergeReport, merge_datasets, select_episodes, split_dataset
from lerobot_dataset.reader import DatasetReader
from lerobot_dataset.writer import DatasetWriter

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
