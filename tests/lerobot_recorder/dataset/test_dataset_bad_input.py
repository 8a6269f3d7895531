"""Bad input gives a typed error naming the problem, and never a half-written dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dataset_synthetic import camera_features, create, make_frame, write_episodes

from lerobot_dataset import (
    DatasetError,
    DatasetNotFoundError,
    DatasetWriter,
    EncoderError,
    EpisodeStateError,
    FeatureError,
    FeatureSpec,
    SchemaMismatchError,
)
from lerobot_dataset.validate import validate


@pytest.fixture
def writer(tmp_path: Path) -> DatasetWriter:
    w = create(tmp_path / "ds")
    w.start_episode("t")
    return w


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("observation.state", np.zeros(3, dtype=np.float32), "shape"),
        ("observation.state", np.array(["a", "b", "c", "d"]), "numeric"),
        ("next.done", np.array([1.0]), "bool"),
        ("observation.images.front", np.zeros((48, 64, 3), dtype=np.float32), "uint8"),
        ("observation.images.front", np.zeros((64, 48, 3), dtype=np.uint8), "shape"),
        ("observation.images.wrist", np.zeros((24, 32), dtype=np.uint8), "shape"),
    ],
)
def test_wrong_value_is_rejected_with_the_key(writer: DatasetWriter, key: str, value: object, message: str) -> None:
    frame = make_frame(writer.features, 0, 0, 1)
    frame[key] = value
    with pytest.raises(FeatureError, match=message) as info:
        writer.add_frame(frame)
    assert key in str(info.value)
    assert writer.episode_frames == 0
    writer.close()


def test_unknown_and_missing_features(writer: DatasetWriter) -> None:
    frame = make_frame(writer.features, 0, 0, 1)
    with pytest.raises(FeatureError, match=r"unknown feature.*'gripper\.force'"):
        writer.add_frame({**frame, "gripper.force": 1.0})
    del frame["action"]
    with pytest.raises(FeatureError, match=r"lacks feature.*'action'"):
        writer.add_frame(frame)
    writer.close()


def test_int_feature_refuses_floats(tmp_path: Path) -> None:
    with DatasetWriter.create(
        tmp_path / "ds", repo_id="l/t", fps=10, features={"count": FeatureSpec("int64", (1,))}
    ) as writer:
        writer.start_episode("t")
        with pytest.raises(FeatureError, match="int64"):
            writer.add_frame({"count": 1.5})
        writer.add_frame({"count": 3})


def test_call_order_errors(tmp_path: Path) -> None:
    with create(tmp_path / "ds") as writer:
        with pytest.raises(EpisodeStateError, match="start_episode"):
            writer.add_frame(make_frame(writer.features, 0, 0, 1))
        with pytest.raises(EpisodeStateError):
            writer.save_episode()
        writer.start_episode("t")
        with pytest.raises(EpisodeStateError, match="still open"):
            writer.start_episode("u")
        with pytest.raises(EpisodeStateError, match="no frames"):
            writer.save_episode()
        assert writer.num_episodes == 0


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ({"a/b": FeatureSpec("float32", (1,))}, "'/'"),
        ({"index": FeatureSpec("int64", (1,))}, "reserved"),
        ({}, "empty"),
    ],
)
def test_bad_declarations(tmp_path: Path, features: dict[str, FeatureSpec], message: str) -> None:
    with pytest.raises(FeatureError, match=message):
        DatasetWriter.create(tmp_path / "ds", repo_id="l/t", fps=30, features=features)
    assert not (tmp_path / "ds" / "meta").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("float16", (3,)), "not supported"),
        (("video", (48, 64)), "height, width, 3"),
        (("float32", (2, 3)), "1-D"),
        (("float32", (3,), ["a", "b"]), "names has 2"),
    ],
)
def test_bad_feature_specs(args: tuple[object, ...], message: str) -> None:
    with pytest.raises(FeatureError, match=message):
        FeatureSpec(*args)  # type: ignore[arg-type]


def test_root_holding_a_different_schema(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root) as writer:
        write_episodes(writer, [3], ["t"])
    expected = camera_features()
    expected["action"] = FeatureSpec("float32", (6,))
    del expected["next.done"]
    expected["next.reward"] = FeatureSpec("float32", (1,))
    with pytest.raises(SchemaMismatchError) as info:
        DatasetWriter.open(root, expect_features=expected)
    text = str(info.value)
    assert "'action'" in text and "'next.reward' is missing" in text and "'next.done' is not expected" in text
    with pytest.raises(SchemaMismatchError, match="fps"):
        DatasetWriter.open(root, expect_fps=15)
    with pytest.raises(SchemaMismatchError, match="h264"):
        DatasetWriter.open(root, video_codec="h264")
    assert validate(root) == []


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"info\.json"):
        DatasetWriter.open(tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing written into a folder that is not a dataset
    root = tmp_path / "ds"
    writer = create(root)
    with pytest.raises(DatasetError, match="another DatasetWriter"):
        DatasetWriter.open(root)
    writer.close()
    DatasetWriter.open(root).close()


def test_h264_refuses_odd_frame_sizes_up_front(tmp_path: Path) -> None:
    odd = {"cam": FeatureSpec("video", (47, 63, 3))}
    with pytest.raises(EncoderError, match="even frame height and width"):
        DatasetWriter.create(tmp_path / "ds", repo_id="l/t", fps=30, features=odd, video_codec="h264")
    with DatasetWriter.create(tmp_path / "av1", repo_id="l/t", fps=30, features=odd) as writer:  # AV1 copes
        writer.start_episode("t")
        for step in range(3):
            writer.add_frame({"cam": np.full((47, 63, 3), 60 * step, dtype=np.uint8)})
        writer.save_episode()
    assert validate(tmp_path / "av1") == []
