"""A lerobot_training checkpoint behind the policy node's interface, observations built from a contract."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ObservationError, PolicyLoadError
from lerobot_policy_node.core.observations import ActionMapping, ObservationAssembler
from lerobot_policy_node.core.policies import CheckpointPolicy, resolve_checkpoint
from lerobot_training.checkpoint import save_policy
from lerobot_training.features import FeatureType, PolicyFeature
from lerobot_training.policies.act import ACTConfig, ACTPolicy

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
NAMES = tuple(f"{j}.pos" for j in JOINTS)
CONTRACT = {
    "robot_type": "so101_follower",
    "fps": 30,
    "features": {
        "observation.state": {"topic": "/follower/joint_states", "type": "sensor_msgs/msg/JointState",
                              "joints": JOINTS, "names": list(NAMES), "units": "rad_to_deg"},
        "observation.images.front": {"topic": "/cameras/front/image_raw", "type": "sensor_msgs/msg/Image",
                                     "shape": [48, 64, 3]},
        "action": {"topic": "/follower/joint_commands", "type": "sensor_msgs/msg/JointState",
                   "joints": JOINTS, "names": list(NAMES), "units": "rad_to_deg"},
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    torch.manual_seed(0)
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (6,), NAMES),
        "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, 24, 32)),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,), NAMES)}
    config = ACTConfig(
        input_features=inputs, output_features=outputs, chunk_size=5, n_action_steps=5, dim_model=32, n_heads=2,
        dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=8,
    )  # fmt: skip
    stats = {
        key: {"mean": torch.zeros(s), "std": torch.ones(s), "min": -torch.ones(s), "max": torch.ones(s)}
        for key, s in (("observation.state", (6,)), ("observation.images.front", (3, 1, 1)), ("action", (6,)))
    }
    directory = tmp_path_factory.mktemp("ckpt") / "pretrained_model"
    save_policy(directory, ACTPolicy(config, stats), fps=30, contract=CONTRACT)
    return str(directory)


def test_checkpoint_runs_on_contract_observations_with_resize(checkpoint):
    policy = CheckpointPolicy(resolve_checkpoint(checkpoint))
    assert [(f.key, f.shape, f.visual) for f in policy.inputs] == [
        ("observation.state", (6,), False),
        ("observation.images.front", (24, 32, 3), True),
    ]
    assert policy.horizon == 5 and policy.action_dim == 6 and policy.fps == 30 and policy.action_names == NAMES
    contract = Contract.from_dict(policy.contract)
    assembler = ObservationAssembler(contract, policy.inputs, latency_s=0.0)
    assembler.start(0)
    picture = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    image = SimpleNamespace(height=48, width=64, encoding="rgb8", is_bigendian=0, step=192, data=picture.tobytes())
    state = SimpleNamespace(name=JOINTS, position=[0.1] * 6)
    for k in range(4):
        t = NS + k * 40_000_000
        assembler.push("/follower/joint_states", state, t, t)
        assembler.push("/cameras/front/image_raw", image, t, t)
    observation = assembler.build(assembler.newest())
    assert observation["observation.images.front"].shape == (24, 32, 3)  # resized from the contract's 48x64
    chunk = policy.predict_chunk(observation)
    assert chunk.shape == (5, 6) and np.all(np.isfinite(chunk))
    assert ActionMapping(contract, policy.action_dim, policy.action_names).to_ros(chunk) == pytest.approx(
        np.radians(chunk)
    )


def test_contract_without_the_camera_is_refused(checkpoint):
    policy = CheckpointPolicy(resolve_checkpoint(checkpoint))
    features = {k: v for k, v in CONTRACT["features"].items() if k != "observation.images.front"}
    contract = Contract.from_dict({**CONTRACT, "features": features}, source="no_camera.yaml")
    with pytest.raises(ObservationError, match=r"observation.images.front.*no_camera.yaml"):
        ObservationAssembler(contract, policy.inputs)


def test_bad_checkpoint_paths_are_clear(tmp_path):
    with pytest.raises(PolicyLoadError, match="neither a directory nor a Hub repo id"):
        resolve_checkpoint(str(tmp_path / "missing" / "deep"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyLoadError, match=r"config\.json"):
        CheckpointPolicy(tmp_path / "empty")


def test_hub_repo_ids_download_through_huggingface_hub(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    def fake_snapshot_download(repo_id, cache_dir=None):
        calls.append((repo_id, cache_dir))
        target = tmp_path / "snapshot"
        target.mkdir(exist_ok=True)
        return str(target)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    assert resolve_checkpoint("user/act_so101", cache_dir=str(tmp_path / "cache")) == tmp_path / "snapshot"
    assert calls == [("user/act_so101", str(tmp_path / "cache"))]

    def offline(repo_id, cache_dir=None):
        raise OSError("no connection")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(PolicyLoadError, match=r"cannot download Hub repo 'user/act_so101'.*local checkpoint"):
        resolve_checkpoint("user/act_so101")
