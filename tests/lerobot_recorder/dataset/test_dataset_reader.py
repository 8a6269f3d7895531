"""DatasetReader: random access and delta_timestamps windows with LeRobot's padding semantics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dataset_synthetic import camera_features, create, write_episodes

from lerobot_dataset import DatasetError, DatasetReader

FRONT = "observation.images.front"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[dict[str, object]]]]:
    root = tmp_path_factory.mktemp("reader") / "ds"
    with create(root, features=camera_features(image=False)) as writer:
        written = write_episodes(writer, [6, 4], ["a", "b"])
    return root, written


def test_windows_are_clamped_to_the_episode_and_flagged(dataset: tuple[Path, list[list[dict[str, object]]]]) -> None:
    root, written = dataset
    deltas = {"action": [-2 / 30, -1 / 30, 0.0, 1 / 30], FRONT: [-1 / 30, 0.0]}
    with DatasetReader(root) as reader:
        first = reader.get(0, deltas)
        assert first["action_is_pad"].tolist() == [True, True, False, False]
        expected = [written[0][i]["action"] for i in (0, 0, 0, 1)]
        np.testing.assert_array_equal(first["action"], np.stack(expected))
        assert first[FRONT].shape == (2, 48, 64, 3)
        assert first[f"{FRONT}_is_pad"].tolist() == [True, False]
        np.testing.assert_array_equal(first[FRONT][0], first[FRONT][1])

        last_of_first = reader.get(5, deltas)  # next step would be episode 1: padded, not leaked
        assert last_of_first["action_is_pad"].tolist() == [False, False, False, True]
        np.testing.assert_array_equal(last_of_first["action"][3], written[0][5]["action"])

        second = reader.get(7, deltas)  # episode 1, frame 1
        assert second["action_is_pad"].tolist() == [True, False, False, False]
        np.testing.assert_array_equal(second["action"][1], written[1][0]["action"])
        assert second["episode_index"] == 1 and second["task"] == "b"


def test_random_access_and_negative_index(dataset: tuple[Path, list[list[dict[str, object]]]]) -> None:
    root, written = dataset
    with DatasetReader(root) as reader:
        order = [9, 0, 5, 3, 7, 1, -1]
        for i in order:
            item = reader[i]
            position = i % len(reader)
            ep, step = (0, position) if position < 6 else (1, position - 6)
            np.testing.assert_array_equal(item["observation.state"], written[ep][step]["observation.state"])
        with pytest.raises(IndexError):
            reader[10]


def test_delta_must_be_a_multiple_of_the_frame_period(dataset: tuple[Path, list[list[dict[str, object]]]]) -> None:
    root, _ = dataset
    with DatasetReader(root) as reader:
        with pytest.raises(DatasetError, match="multiple of 1/fps"):
            reader.get(0, {"action": [0.01]})
        with pytest.raises(DatasetError, match="not a feature"):
            reader.get(0, {"nope": [0.0]})


_FORKED_READER: list[DatasetReader] = []


def test_forked_child_decodes_with_its_own_files(dataset: tuple[Path, list[list[dict[str, object]]]]) -> None:
    import multiprocessing

    root, _ = dataset
    reader = DatasetReader(root)
    parent_frame = reader[3][FRONT]  # opens the mp4 in the parent; the child inherits it by fork
    _FORKED_READER[:] = [reader]
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child_frames = pool.map(_decode_in_child, [3, 8])
    np.testing.assert_array_equal(child_frames[0], parent_frame)
    np.testing.assert_array_equal(child_frames[1], reader[8][FRONT])
    reader.close()


def _decode_in_child(index: int) -> np.ndarray:
    frame: np.ndarray = _FORKED_READER[0][index][FRONT]
    return frame
