"""Checkpoints: save -> load -> identical outputs, bad checkpoints, LeRobot ACT checkpoint directories."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TINY_ACT
from safetensors.torch import save_file
from test_training_policies import IMAGE, make_act, make_diffusion

from lerobot_training.checkpoint import (
    CONFIG_NAME,
    METADATA_NAME,
    POSTPROCESSOR_NAME,
    PREPROCESSOR_NAME,
    WEIGHTS_NAME,
    load_policy,
    save_policy,
)
from lerobot_training.errors import CheckpointError
from lerobot_training.policies.act import ACTConfig, ACTPolicy

OBSERVATION = {"observation.state": torch.tensor([0.3, -1.0, 2.0]), "observation.images.cam0": torch.rand(IMAGE)}
CONTRACT = {"robot_type": "so101_follower", "fps": 10, "features": {"action": {"topic": "/follower/joint_commands"}}}


@pytest.fixture(autouse=True)
def _no_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading must never unpickle: any pickle or torch.load use fails the test."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("checkpoint loading unpickled something")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(torch, "load", refuse)


@pytest.mark.parametrize("build", [make_act, make_diffusion], ids=["act", "diffusion"])
def test_save_load_gives_identical_outputs(tmp_path: Path, build: Any) -> None:
    torch.manual_seed(0)
    policy = build().eval()
    save_policy(tmp_path / "ckpt", policy, fps=10, contract=CONTRACT, extra={"step": 3})
    loaded = load_policy(tmp_path / "ckpt")
    assert loaded.source == "lerobot_ros"
    assert loaded.fps == 10
    assert loaded.contract == CONTRACT
    assert loaded.metadata["chunk_length"] == policy.config.chunk_length
    for key, value in policy.state_dict().items():
        assert torch.equal(loaded.policy.state_dict()[key], value), key
    torch.manual_seed(1)
    expected = policy.predict_chunk(OBSERVATION)
    torch.manual_seed(1)
    assert torch.equal(loaded.policy.predict_chunk(OBSERVATION), expected)


def test_config_json_describes_features_fps_chunk_and_normalisation(tmp_path: Path) -> None:
    policy = make_act()
    save_policy(tmp_path / "ckpt", policy, fps=30)
    config = json.loads((tmp_path / "ckpt" / CONFIG_NAME).read_text())
    assert config["type"] == "act"
    assert config["input_features"]["observation.images.cam0"] == {"type": "VISUAL", "shape": list(IMAGE)}
    assert config["output_features"]["action"]["shape"] == [2]
    assert config["chunk_size"] == TINY_ACT["chunk_size"]
    assert "lerobot_ros" not in config  # LeRobot's config decoder refuses unknown keys
    meta = json.loads((tmp_path / "ckpt" / METADATA_NAME).read_text())
    assert meta["config_version"] == 2 and meta["fps"] == 30 and meta["contract"] is None
    assert meta["normalization"]["observation.state"] == "MEAN_STD"


def test_checkpoint_has_lerobots_processor_files_with_the_statistics(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    policy = make_act()
    save_policy(tmp_path / "ckpt", policy, fps=30)
    pre = json.loads((tmp_path / "ckpt" / PREPROCESSOR_NAME).read_text())
    assert [step["registry_name"] for step in pre["steps"]] == [
        "rename_observations_processor", "to_batch_processor", "device_processor", "normalizer_processor",
    ]  # fmt: skip
    post = json.loads((tmp_path / "ckpt" / POSTPROCESSOR_NAME).read_text())
    assert [step["registry_name"] for step in post["steps"]] == ["unnormalizer_processor", "device_processor"]
    state = load_file(str(tmp_path / "ckpt" / pre["steps"][3]["state_file"]))
    for key, stats in policy.normalizer.stats_dict().items():
        for stat, value in stats.items():
            assert torch.equal(state[f"{key}.{stat}"], value), (key, stat)
    weights = load_file(str(tmp_path / "ckpt" / WEIGHTS_NAME))
    assert not [key for key in weights if key.startswith("normalizer.")]


def test_version_1_checkpoint_still_loads(tmp_path: Path) -> None:
    from safetensors.torch import save_file as save_tensors

    torch.manual_seed(0)
    policy = make_act().eval()
    directory = tmp_path / "v1"
    directory.mkdir()
    save_tensors({k: v.contiguous() for k, v in policy.state_dict().items()}, str(directory / WEIGHTS_NAME))
    document = {**policy.config.to_dict(), "lerobot_ros": {"config_version": 1, "fps": 15, "contract": None}}
    (directory / CONFIG_NAME).write_text(json.dumps(document))
    loaded = load_policy(directory)
    assert loaded.source == "lerobot_ros" and loaded.fps == 15
    assert torch.equal(loaded.policy.predict_chunk(OBSERVATION), policy.predict_chunk(OBSERVATION))


def _saved(tmp_path: Path) -> Path:
    save_policy(tmp_path / "ckpt", make_act(), fps=10)
    return tmp_path / "ckpt"


def _edit_config(directory: Path, **changes: Any) -> None:
    path = directory / CONFIG_NAME
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if key == "config_version":
            meta = json.loads((directory / METADATA_NAME).read_text())
            meta["config_version"] = value
            (directory / METADATA_NAME).write_text(json.dumps(meta))
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_unknown_policy_type_is_named(tmp_path: Path) -> None:
    directory = _saved(tmp_path)
    _edit_config(directory, type="pi0")
    with pytest.raises(CheckpointError, match=r"unknown policy type 'pi0'.*act, diffusion"):
        load_policy(directory)


def test_newer_config_version_is_refused(tmp_path: Path) -> None:
    directory = _saved(tmp_path)
    _edit_config(directory, config_version=3)
    with pytest.raises(CheckpointError, match="config_version 3 is newer"):
        load_policy(directory)


def test_unknown_config_field_is_named(tmp_path: Path) -> None:
    directory = _saved(tmp_path)
    _edit_config(directory, use_magic=True)
    with pytest.raises(CheckpointError, match="'use_magic'"):
        load_policy(directory)


def test_bad_field_value_is_named(tmp_path: Path) -> None:
    directory = _saved(tmp_path)
    _edit_config(directory, chunk_size="many")
    with pytest.raises(CheckpointError, match="'chunk_size' must be an integer"):
        load_policy(directory)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing"])
def test_corrupt_safetensors_is_reported(tmp_path: Path, damage: str) -> None:
    directory = _saved(tmp_path)
    weights = directory / WEIGHTS_NAME
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:-1000])
    elif damage == "garbage":
        weights.write_bytes(b"\x00" * 64)
    else:
        weights.unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_policy(directory)


def test_missing_or_misshapen_tensor_is_named(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    directory = _saved(tmp_path)
    tensors = load_file(str(directory / WEIGHTS_NAME))
    del tensors["model.action_head.bias"]
    save_file(tensors, str(directory / WEIGHTS_NAME))
    with pytest.raises(CheckpointError, match=r"missing \['model.action_head.bias'\]"):
        load_policy(directory)
    tensors["model.action_head.bias"] = torch.zeros(7)
    save_file(tensors, str(directory / WEIGHTS_NAME))
    with pytest.raises(CheckpointError, match=r"'model.action_head.bias' has shape \(7,\)"):
        load_policy(directory)


def test_missing_directory_and_config_are_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_policy(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"no config\.json"):
        load_policy(tmp_path / "empty")


# A LeRobot 0.4.4 ACT checkpoint, built from the documented layout (shared/LEROBOT_ACT_CHECKPOINT.md and
# LeRobot's modeling_act.py), not from this package's own state dict.


def lerobot_act_tensor_shapes(cfg: dict[str, Any], state_dim: int, action_dim: int) -> dict[str, tuple[int, ...]]:
    d, ff = cfg["dim_model"], cfg["dim_feedforward"]
    shapes: dict[str, tuple[int, ...]] = {}

    def bn(prefix: str, channels: int) -> None:
        for name in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{prefix}.{name}"] = (channels,)

    shapes["model.backbone.conv1.weight"] = (64, 3, 7, 7)
    bn("model.backbone.bn1", 64)
    channels = 64
    for layer, width in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            prefix = f"model.backbone.layer{layer}.{block}"
            in_ch = channels if block == 0 else width
            shapes[f"{prefix}.conv1.weight"] = (width, in_ch, 3, 3)
            bn(f"{prefix}.bn1", width)
            shapes[f"{prefix}.conv2.weight"] = (width, width, 3, 3)
            bn(f"{prefix}.bn2", width)
            if block == 0 and layer > 1:
                shapes[f"{prefix}.downsample.0.weight"] = (width, in_ch, 1, 1)
                bn(f"{prefix}.downsample.1", width)
        channels = width

    def attention(prefix: str) -> None:
        shapes[f"{prefix}.in_proj_weight"] = (3 * d, d)
        shapes[f"{prefix}.in_proj_bias"] = (3 * d,)
        shapes[f"{prefix}.out_proj.weight"] = (d, d)
        shapes[f"{prefix}.out_proj.bias"] = (d,)

    def ffn_and_norms(prefix: str, norms: int) -> None:
        shapes.update({f"{prefix}.linear1.weight": (ff, d), f"{prefix}.linear1.bias": (ff,),
                       f"{prefix}.linear2.weight": (d, ff), f"{prefix}.linear2.bias": (d,)})  # fmt: skip
        for n in range(1, norms + 1):
            shapes[f"{prefix}.norm{n}.weight"] = (d,)
            shapes[f"{prefix}.norm{n}.bias"] = (d,)

    for stack, count in (("encoder", cfg["n_encoder_layers"]), ("vae_encoder", cfg["n_vae_encoder_layers"])):
        for i in range(count):
            attention(f"model.{stack}.layers.{i}.self_attn")
            ffn_and_norms(f"model.{stack}.layers.{i}", 2)
    for i in range(cfg["n_decoder_layers"]):
        attention(f"model.decoder.layers.{i}.self_attn")
        attention(f"model.decoder.layers.{i}.multihead_attn")
        ffn_and_norms(f"model.decoder.layers.{i}", 3)
    shapes["model.decoder.norm.weight"] = shapes["model.decoder.norm.bias"] = (d,)
    shapes.update({
        "model.action_head.weight": (action_dim, d), "model.action_head.bias": (action_dim,),
        "model.encoder_img_feat_input_proj.weight": (d, 512, 1, 1), "model.encoder_img_feat_input_proj.bias": (d,),
        "model.encoder_robot_state_input_proj.weight": (d, state_dim),
        "model.encoder_robot_state_input_proj.bias": (d,),
        "model.encoder_latent_input_proj.weight": (d, cfg["latent_dim"]), "model.encoder_latent_input_proj.bias": (d,),
        "model.vae_encoder_robot_state_input_proj.weight": (d, state_dim),
        "model.vae_encoder_robot_state_input_proj.bias": (d,),
        "model.vae_encoder_action_input_proj.weight": (d, action_dim), "model.vae_encoder_action_input_proj.bias": (d,),
        "model.vae_encoder_latent_output_proj.weight": (2 * cfg["latent_dim"], d),
        "model.vae_encoder_latent_output_proj.bias": (2 * cfg["latent_dim"],),
        "model.encoder_1d_feature_pos_embed.weight": (2, d),
        "model.decoder_pos_embed.weight": (cfg["chunk_size"], d),
        "model.vae_encoder_cls_embed.weight": (1, d),
        "model.vae_encoder_pos_enc": (1, cfg["chunk_size"] + 2, d),
    })  # fmt: skip
    return shapes


LEROBOT_DEFAULTS = {
    "chunk_size": 100, "dim_model": 512, "dim_feedforward": 3200, "n_encoder_layers": 4, "n_decoder_layers": 1,
    "n_vae_encoder_layers": 4, "latent_dim": 32,
}  # fmt: skip


def test_documented_layout_has_234_tensors_at_default_size() -> None:
    # The reference figure from the LeRobot-trained checkpoint; guards the name generator above.
    assert len(lerobot_act_tensor_shapes(LEROBOT_DEFAULTS, 6, 6)) == 234


def test_default_size_act_has_lerobots_tensor_names_and_parameter_count() -> None:
    from lerobot_training.features import FeatureType, PolicyFeature

    config = ACTConfig(
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (6,)),
                        "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, 96, 128))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))},
    )  # fmt: skip
    model = ACTPolicy(config).model
    shapes = {f"model.{k}": tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == lerobot_act_tensor_shapes(LEROBOT_DEFAULTS, 6, 6)
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == 51.6


STATE_NAMES_6 = 6
SMALL = {**LEROBOT_DEFAULTS, "chunk_size": 5, "dim_model": 32, "dim_feedforward": 48, "n_encoder_layers": 2,
         "n_vae_encoder_layers": 1, "latent_dim": 4}  # fmt: skip
STAT_NAMES = ("count", "min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99")


def lerobot_config_json(cfg: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "act", "n_obs_steps": 1,
        "input_features": {"observation.state": {"type": "STATE", "shape": [6]},
                           "observation.images.front": {"type": "VISUAL", "shape": [3, 96, 128]}},
        "output_features": {"action": {"type": "ACTION", "shape": [6]}},
        "device": "cpu", "use_amp": False, "use_peft": False, "push_to_hub": False, "repo_id": None, "private": None,
        "tags": None, "license": None, "pretrained_path": None,
        "chunk_size": cfg["chunk_size"], "n_action_steps": cfg["chunk_size"],
        "normalization_mapping": {"VISUAL": "MEAN_STD", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"},
        "vision_backbone": "resnet18", "pretrained_backbone_weights": "ResNet18_Weights.IMAGENET1K_V1",
        "replace_final_stride_with_dilation": False, "pre_norm": False, "dim_model": cfg["dim_model"], "n_heads": 8,
        "dim_feedforward": cfg["dim_feedforward"], "feedforward_activation": "relu",
        "n_encoder_layers": cfg["n_encoder_layers"], "n_decoder_layers": cfg["n_decoder_layers"], "use_vae": True,
        "latent_dim": cfg["latent_dim"], "n_vae_encoder_layers": cfg["n_vae_encoder_layers"],
        "temporal_ensemble_coeff": None, "dropout": 0.1, "kl_weight": 10.0, "optimizer_lr": 1e-05,
        "optimizer_weight_decay": 0.0001, "optimizer_lr_backbone": 1e-05,
    }  # fmt: skip


def lerobot_stats(action_mean: float) -> dict[str, torch.Tensor]:
    out = {}
    for feature, shape in (("observation.state", (6,)), ("action", (6,)), ("observation.images.front", (3, 1, 1))):
        for stat in STAT_NAMES:
            value = torch.full(shape, 2.0 if stat == "std" else 0.5)
            if feature == "action" and stat == "mean":
                value = torch.full(shape, action_mean)
            out[f"{feature}.{stat}"] = value
    return out


def build_lerobot_checkpoint(directory: Path, *, legacy: bool = False, action_mean: float = 100.0) -> Path:
    directory.mkdir(parents=True)
    generator = torch.Generator().manual_seed(0)
    tensors = {
        key: torch.randn(shape, generator=generator) * 0.05
        for key, shape in lerobot_act_tensor_shapes(SMALL, 6, 6).items()
    }
    for key, value in tensors.items():
        if key.endswith("running_var"):
            tensors[key] = torch.rand(value.shape, generator=generator) + 0.5
    stats = lerobot_stats(action_mean)
    if legacy:  # LeRobot < 0.4 kept the statistics as buffers inside model.safetensors
        groups = [("observation.state", "normalize_inputs"), ("observation.images.front", "normalize_inputs"),
                  ("action", "normalize_targets"), ("action", "unnormalize_outputs")]  # fmt: skip
        for feature, group in groups:
            for stat in ("mean", "std"):
                tensors[f"{group}.buffer_{feature.replace('.', '_')}.{stat}"] = stats[f"{feature}.{stat}"].clone()
    else:
        save_file(stats, str(directory / "policy_preprocessor_step_3_normalizer_processor.safetensors"))
        save_file(stats, str(directory / "policy_postprocessor_step_0_unnormalizer_processor.safetensors"))
        (directory / "policy_preprocessor.json").write_text(json.dumps({"name": "policy_preprocessor", "steps": []}))
    save_file(tensors, str(directory / WEIGHTS_NAME))
    (directory / CONFIG_NAME).write_text(json.dumps(lerobot_config_json(SMALL), indent=4))
    (directory / "train_config.json").write_text(json.dumps({"dataset": {"repo_id": "local/x"}}))
    return directory


LEROBOT_OBSERVATION = {"observation.state": torch.zeros(6), "observation.images.front": torch.rand(96, 128, 3)}


@pytest.mark.parametrize("legacy", [False, True], ids=["lerobot-0.4-processor-stats", "lerobot-0.3-buffer-stats"])
def test_lerobot_act_checkpoint_directory_loads_and_predicts(tmp_path: Path, legacy: bool) -> None:
    directory = build_lerobot_checkpoint(tmp_path / "pretrained_model", legacy=legacy, action_mean=100.0)
    loaded = load_policy(directory)
    assert loaded.source == "lerobot" and loaded.fps is None
    policy = loaded.policy
    assert isinstance(policy, ACTPolicy)
    assert policy.config.chunk_size == SMALL["chunk_size"] and policy.config.n_heads == 8
    from safetensors.torch import load_file

    stored = load_file(str(directory / WEIGHTS_NAME))
    own = policy.state_dict()
    assert all(torch.equal(own[k], v) for k, v in stored.items() if k.startswith("model."))
    assert torch.equal(policy.normalizer.stats_dict()["action"]["mean"], torch.full((6,), 100.0))
    chunk = policy.predict_chunk(
        {**LEROBOT_OBSERVATION, "observation.images.front": torch.zeros(96, 128, 3, dtype=torch.uint8)}
    )
    assert chunk.shape == (SMALL["chunk_size"], 6)
    # actions come out in dataset units: unnormalised around the checkpoint's action mean (std 2)
    assert (chunk - 100.0).abs().max() < 20.0
    # save as our format and load again: same outputs
    save_policy(tmp_path / "ours", policy, fps=30)
    again = load_policy(tmp_path / "ours").policy
    observation = {**LEROBOT_OBSERVATION, "observation.images.front": torch.rand(3, 96, 128)}
    assert torch.equal(again.predict_chunk(observation), policy.predict_chunk(observation))


def test_lerobot_checkpoint_with_missing_stats_names_the_feature(tmp_path: Path) -> None:
    directory = build_lerobot_checkpoint(tmp_path / "pretrained_model")
    for path in directory.glob("policy_*processor*.safetensors"):
        path.unlink()
    with pytest.raises(CheckpointError, match=r"'mean'.*'observation.state'"):
        load_policy(directory)


def test_lerobot_checkpoint_with_a_missing_tensor_is_refused(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    directory = build_lerobot_checkpoint(tmp_path / "pretrained_model")
    tensors = load_file(str(directory / WEIGHTS_NAME))
    del tensors["model.backbone.layer3.0.downsample.0.weight"]
    save_file(tensors, str(directory / WEIGHTS_NAME))
    with pytest.raises(CheckpointError, match=r"layer3\.0\.downsample\.0\.weight"):
        load_policy(directory)


def test_lerobot_checkpoint_with_an_unsupported_preprocessing_field_is_named(tmp_path: Path) -> None:
    directory = build_lerobot_checkpoint(tmp_path / "pretrained_model")
    _edit_config(directory, resize_shape=[96, 96])
    with pytest.raises(CheckpointError, match=r"resize_shape=\[96, 96\] is not supported.*LeRobot itself"):
        load_policy(directory)


def test_lerobot_checkpoint_with_lerobot_06_training_only_fields_loads(tmp_path: Path) -> None:
    """LeRobot 0.6 writes `gradient_checkpointing` (diffusion's UNet blocks recomputed during training): a training
    setting, ignored like the optimiser's."""
    directory = build_lerobot_checkpoint(tmp_path / "pretrained_model")
    _edit_config(directory, gradient_checkpointing=True)
    assert load_policy(directory).source == "lerobot"


def test_pretrained_backbone_weights_load_from_a_local_file(tmp_path: Path) -> None:
    shapes = lerobot_act_tensor_shapes(SMALL, 6, 6)
    generator = torch.Generator().manual_seed(3)
    # torchvision's resnet18 state dict keys (with the classifier, which is ignored)
    weights = {k.removeprefix("model.backbone."): torch.randn(s, generator=generator)
               for k, s in shapes.items() if k.startswith("model.backbone.")}  # fmt: skip
    weights["fc.weight"], weights["fc.bias"] = torch.zeros(1000, 512), torch.zeros(1000)
    save_file(weights, str(tmp_path / "resnet18.safetensors"))
    policy = make_act()
    policy.load_pretrained_backbone(tmp_path / "resnet18.safetensors")
    assert torch.equal(policy.model.backbone.layer4[1].conv2.weight, weights["layer4.1.conv2.weight"])
    del weights["layer1.0.conv1.weight"]
    save_file(weights, str(tmp_path / "partial.safetensors"))
    with pytest.raises(CheckpointError, match=r"layer1\.0\.conv1\.weight"):
        policy.load_pretrained_backbone(tmp_path / "partial.safetensors")
