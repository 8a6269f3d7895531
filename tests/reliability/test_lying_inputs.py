"""Inputs that lie (issue #38): files and bags whose metadata or structure says something the data does not.

Each case feeds one hostile input to the path a user would run and is judged like a fuzz input: refused with a
one-line project error (clear_error), or accepted with the right data (ok); anything else (a traceback, a hang,
a dataset `dataset validate` refuses) is a crash or data lost. The counts go into the reliability table
(`lying_inputs`), in the default run and in `make reliability` (the cases are few and fast).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz_harness import Counts, Finding

REPO = Path(__file__).resolve().parents[2]
HUGE = 100_000


def _one_line(err: BaseException) -> str:
    text = str(err)
    assert text.strip() and "\n" not in text.strip(), f"{type(err).__name__} is not one line: {text!r}"
    return text


def _small_dataset(root: Path) -> Path:
    """Two episodes of a 3-joint state, action and an 8x12 camera stored as images (no video encoder needed)."""
    from lerobot_dataset import DatasetWriter, FeatureSpec

    features = {
        "observation.state": FeatureSpec("float32", (3,), ["a", "b", "c"]),
        "observation.images.front": FeatureSpec("image", (8, 12, 3)),
        "action": FeatureSpec("float32", (3,), ["a", "b", "c"]),
    }
    with DatasetWriter.create(root, repo_id="local/lying", fps=10, features=features) as writer:
        for episode in range(2):
            writer.start_episode("move")
            for frame in range(6):
                value = np.full(3, episode + frame / 10, dtype=np.float32)
                image = np.full((8, 12, 3), 20 * frame, dtype=np.uint8)
                writer.add_frame({"observation.state": value, "observation.images.front": image, "action": value})
            writer.save_episode()
    return root


def _edit_info(root: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = root / "meta" / "info.json"
    info = json.loads(path.read_text())
    edit(info)
    path.write_text(json.dumps(info, indent=2))


def _contract_with_a_billion_laughs(directory: Path) -> Path:
    """The shipped SO-101 contract whose free-form `description` is 9 levels of 9 aliases (9**9 strings)."""
    lines = ["  - &x0 [" + ", ".join(['"lol"'] * 9) + "]"]
    lines += [f"  - &x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, 9)]
    text = (REPO / "config" / "contracts" / "so101.yaml").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("description:"))
    path = directory / "contract.yaml"
    path.write_text(text + "\ndescription:\n" + "\n".join(lines) + "\n")
    return path


def contract_billion_laughs(tmp_path: Path) -> str:
    """A contract whose free-form description is nested anchors: bag2dataset ran for minutes, memory growing."""
    from lerobot_contract import ContractError, load_contract

    with pytest.raises(ContractError, match="aliases") as caught:
        load_contract(_contract_with_a_billion_laughs(tmp_path))
    return _one_line(caught.value)


def info_fps_zero(tmp_path: Path) -> str:
    """`dataset info` on an info.json saying fps 0 ended in ZeroDivisionError."""
    from lerobot_recorder.dataset_command import _run_info
    from lerobot_ros.command import CommandError

    root = _small_dataset(tmp_path / "ds")
    _edit_info(root, lambda info: info.update(fps=0))
    with pytest.raises(CommandError, match="fps must be a positive integer") as caught:
        _run_info(argparse.Namespace(root=root))
    return _one_line(caught.value)


def info_huge_camera(tmp_path: Path) -> str:
    """`train` sized its policy from an info.json declaring a 100000x100000 camera over 8x12 pictures."""
    from lerobot_dataset import DatasetFormatError, DatasetReader
    from lerobot_training.data import dataset_features

    root = _small_dataset(tmp_path / "ds")
    _edit_info(root, lambda info: info["features"]["observation.images.front"].update(shape=[HUGE, HUGE, 3]))
    with DatasetReader(root) as reader, pytest.raises(DatasetFormatError, match="holds \\[8, 12, 3\\]") as caught:
        dataset_features(reader)
    return _one_line(caught.value)


def info_short_state(tmp_path: Path) -> str:
    """An info.json declaring a longer state vector than the data holds."""
    from lerobot_dataset import DatasetFormatError, DatasetReader
    from lerobot_training.data import dataset_features

    root = _small_dataset(tmp_path / "ds")
    _edit_info(root, lambda info: info["features"]["observation.state"].update(shape=[7], names=list("abcdefg")))
    with DatasetReader(root) as reader, pytest.raises(DatasetFormatError, match="holds \\[3\\]") as caught:
        dataset_features(reader)
    return _one_line(caught.value)


def _checkpoint_with_a_huge_camera(directory: Path) -> Path:
    import torch

    from lerobot_training.checkpoint import CONFIG_NAME, save_policy
    from lerobot_training.features import FeatureType, PolicyFeature
    from lerobot_training.policies.act import ACTConfig, ACTPolicy

    torch.manual_seed(0)
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (3,)),
        "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, 8, 12)),
    }
    config = ACTConfig(
        input_features=inputs, output_features={"action": PolicyFeature(FeatureType.ACTION, (3,))}, chunk_size=4,
        n_action_steps=4, dim_model=16, n_heads=2, dim_feedforward=32, n_encoder_layers=1, n_decoder_layers=1,
        n_vae_encoder_layers=1, latent_dim=4,
    )  # fmt: skip
    stats = {
        "observation.state": {"mean": torch.zeros(3), "std": torch.ones(3)},
        "observation.images.front": {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)},
        "action": {"mean": torch.zeros(3), "std": torch.ones(3)},
    }
    save_policy(directory, ACTPolicy(config, stats), fps=10)
    document = json.loads((directory / CONFIG_NAME).read_text())
    document["input_features"]["observation.images.front"]["shape"] = [3, HUGE, HUGE]
    (directory / CONFIG_NAME).write_text(json.dumps(document))
    return directory


def checkpoint_huge_camera_policy_node(tmp_path: Path) -> str:
    """The policy node given a checkpoint declaring a 100000x100000 camera tried to allocate 30,000,000,000 bytes."""
    from lerobot_policy_node.core.errors import PolicyLoadError
    from lerobot_policy_node.core.policies import CheckpointPolicy

    directory = _checkpoint_with_a_huge_camera(tmp_path / "ckpt")
    with pytest.raises(PolicyLoadError, match=r"camera input 'observation\.images\.front'") as caught:
        CheckpointPolicy(directory)
    return _one_line(caught.value)


def checkpoint_huge_camera_policy_server(tmp_path: Path) -> str:
    """The policy server's load of the same checkpoint (lerobot_training backend)."""
    from lerobot_policy_server.backends import LoadError, TrainingBackend

    directory = _checkpoint_with_a_huge_camera(tmp_path / "ckpt")
    with pytest.raises(LoadError, match=r"camera input 'observation\.images\.front'") as caught:
        TrainingBackend(directory)
    return _one_line(caught.value)


def output_symlink_loop(tmp_path: Path) -> str:
    """`bag2dataset --output` on a root that is a symbolic link to itself: RuntimeError traceback."""
    from lerobot_bags.errors import BagError
    from lerobot_bags.pipeline import check_output

    root = tmp_path / "loop"
    root.symlink_to(root)
    with pytest.raises(BagError, match="symbolic link") as caught:
        check_output(root)
    return _one_line(caught.value)


def _type_change_bag(tmp_path: Path) -> tuple[Any, Path]:
    from fuzz_targets import BagSemantics, rng_for

    target = BagSemantics()
    target.setup(tmp_path / "work")
    entries, _ = target.mutate("type_change", rng_for(1, 0))
    return target, target.write(tmp_path / "changed", entries)


def type_change_refused(tmp_path: Path) -> str:
    """A topic changing type mid-bag was converted with half its frames and exit 0."""
    from lerobot_bags.errors import BagError

    target, bag = _type_change_bag(tmp_path)
    with pytest.raises(BagError, match="--allow-type-change") as caught:
        target.judge("mcap", bag)
    return _one_line(caught.value)


def type_change_allowed(tmp_path: Path) -> str:
    """With allow_type_change the part of the topic of the contract's type converts, the rest counted and warned."""
    import dataclasses

    from fuzz_harness import AcceptedChanged

    target, bag = _type_change_bag(tmp_path)
    target.options = dataclasses.replace(target.options, allow_type_change=True)
    frames, error, warnings = target.convert(bag)
    assert error is None and frames, error
    assert any("the contract expects" in w for w in warnings), warnings
    assert min(target.coverages) < 1.0, target.coverages
    with pytest.raises(AcceptedChanged):
        target.judge("mcap", bag)
    return f"{len(frames)} frames of {len(target.reference['mcap'])}, warned"


def camera_dead_before_first_frame(tmp_path: Path) -> str:
    """recorder_dead_sensors seed 1 input 30: the camera never delivers an episode's first frame and the session
    stops; the recorder left a folder without an episode that `dataset validate` refuses."""
    from fuzz_recorder_session import RecorderDeadSensors, SessionEnded, remove_stale_session_dirs

    from lerobot_dataset.validate import validate

    target = RecorderDeadSensors()
    try:
        target.setup(tmp_path)
        with pytest.raises(SessionEnded) as caught:
            target.run(1, 30)
        root = target.work / "ds"
        problems = validate(root) if root.exists() else []
        assert problems == [], f"{root} is left and dataset validate refuses it: {problems}"
    finally:
        remove_stale_session_dirs()
    return _one_line(caught.value)


CASES: dict[str, tuple[Callable[[Path], str], str]] = {
    "contract_billion_laughs": (contract_billion_laughs, "clear_error"),
    "info_fps_zero": (info_fps_zero, "clear_error"),
    "info_huge_camera": (info_huge_camera, "clear_error"),
    "info_short_state": (info_short_state, "clear_error"),
    "checkpoint_huge_camera_policy_node": (checkpoint_huge_camera_policy_node, "clear_error"),
    "checkpoint_huge_camera_policy_server": (checkpoint_huge_camera_policy_server, "clear_error"),
    "output_symlink_loop": (output_symlink_loop, "clear_error"),
    "type_change_refused": (type_change_refused, "clear_error"),
    "type_change_allowed": (type_change_allowed, "ok"),
    "camera_dead_before_first_frame": (camera_dead_before_first_frame, "clear_error"),
}


COUNTS = Counts("lying_inputs")


@pytest.mark.parametrize("name", sorted(CASES))
def test_lying_input(name: str, tmp_path: Path, reliability_results: Callable[[Counts], None]) -> None:
    if COUNTS.tried == 0:
        reliability_results(COUNTS)  # one row for every case (the table is printed at the end of the session)
    case, expected = CASES[name]
    try:
        detail = case(tmp_path)
    except BaseException as err:
        kind = "data_lost" if "dataset validate refuses" in str(err) else "crash"
        COUNTS.add(kind, Finding("lying_inputs", kind, 0, 0, name, f"{type(err).__name__}: {err}"))
        raise
    COUNTS.add(expected)
    assert detail
