"""Converted bags load in LeRobot 0.4.4's own `LeRobotDataset` (reference venv, run as a subprocess with the
format tests' tests/lerobot_recorder/dataset/reference_loader.py) and give the frames our reader gives; the
source records (meta/lerobot_ros_sources.json) do not disturb its loader."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from bag_helpers import REPO_ROOT

from lerobot_bags.convert import ConvertOptions, SplitRule
from lerobot_bags.pipeline import convert_bags
from lerobot_bags.sources import SOURCES_PATH
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
from lerobot_dataset import DatasetReader

REF_PYTHON = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", REPO_ROOT / ".venv-lerobot-ref")) / "bin" / "python"
LOADER = REPO_ROOT / "tests" / "lerobot_recorder" / "dataset" / "reference_loader.py"

pytestmark = [
    pytest.mark.reference,
    pytest.mark.skipif(
        not REF_PYTHON.exists() or not LOADER.exists(),
        reason="the LeRobot reference venv (.venv-lerobot-ref) or its loader script is absent; "
        "build it with scripts/setup.sh --with-lerobot-reference",
    ),
]


def test_converted_bags_load_in_lerobot(make_bag: Callable[..., Path], tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.6, height=48, width=64)
    contract = contract_for(spec, camera_dtype="video")
    raw = contract.to_dict()
    raw["features"]["observation.images.wrist"]["dtype"] = "image"
    contract = type(contract).from_dict(raw)
    bags = [
        make_bag("a", duration_s=0.6, height=48, width=64),
        make_bag("b", duration_s=0.6, height=48, width=64, seed=4),
    ]
    root = tmp_path / "converted"
    for bag, task in zip(bags, ("reach", "grasp"), strict=True):
        options = ConvertOptions(contract=contract, task=task, split=SplitRule())
        convert_bags([bag], options, root=root, repo_id="test/converted", append=root.exists())
    assert len(json.loads((root / SOURCES_PATH).read_text())["episodes"]) == 2
    out = tmp_path / "lerobot.npz"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), HF_LEROBOT_HOME=str(tmp_path / "hf-lerobot"))
    run = subprocess.run(
        [str(REF_PYTHON), str(LOADER), str(root), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    with np.load(out) as data:
        loaded = {key: data[key] for key in data.files}
    with DatasetReader(root) as reader:
        assert int(loaded["len"]) == len(reader) and int(loaded["num_episodes"]) == 2
        for i in range(len(reader)):
            ours = reader[i]
            assert loaded["task"][i] == ours["task"]
            for key in ("index", "episode_index", "frame_index", "task_index"):
                assert loaded[key][i] == ours[key]
            for key in ("observation.state", "action", "observation.images.wrist"):
                np.testing.assert_array_equal(loaded[key][i], ours[key], err_msg=key)
            diff = np.abs(loaded["observation.images.front"][i].astype(int) - ours["observation.images.front"])
            assert diff.max() <= 1
