"""Upload a checkpoint directory to the Hugging Face Hub as a model repository (LeRobot's layout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lerobot_training.checkpoint import CONFIG_NAME, WEIGHTS_NAME
from lerobot_training.errors import TrainingError


class HubPushError(TrainingError):
    """The checkpoint could not be pushed: names the repo and what failed."""


def model_card(config: dict[str, Any], repo_id: str) -> str:
    """README.md of the model repo: LeRobot tags in the front matter, then the policy and its features."""
    import yaml

    header = {"library_name": "lerobot", "license": "apache-2.0", "tags": ["LeRobot", "robotics", str(config["type"])]}
    inputs = "\n".join(f"- `{k}`: {v['type']} {v['shape']}" for k, v in config.get("input_features", {}).items())
    outputs = "\n".join(f"- `{k}`: {v['type']} {v['shape']}" for k, v in config.get("output_features", {}).items())
    body = [
        f"# {repo_id}",
        "",
        f"A `{config['type']}` policy trained with `lerobot-ros train` on a LeRobot v3 dataset.",
        "",
        "## Inputs",
        inputs,
        "",
        "## Outputs",
        outputs,
        "",
    ]
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + "\n".join(body)


def push_checkpoint(
    directory: Path, repo_id: str, *, private: bool = False, api: Any = None, commit_message: str | None = None
) -> str:
    """Push `directory` (config.json, model.safetensors, contract) to `repo_id`; returns the repo URL.

    `api` defaults to `huggingface_hub.HfApi()` (which honours HF_ENDPOINT and HF_TOKEN).
    """
    directory = Path(directory)
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        if not (directory / name).is_file():
            raise HubPushError(f"{directory} lacks {name}; push a checkpoint's pretrained_model directory")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise HubPushError(f"repo id {repo_id!r} must look like 'user_or_org/name'")
    config = json.loads((directory / CONFIG_NAME).read_text())
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    from huggingface_hub.errors import HfHubHTTPError

    try:
        url = api.create_repo(repo_id, private=private, repo_type="model", exist_ok=True)
        api.upload_folder(
            repo_id=repo_id,
            folder_path=directory,
            repo_type="model",
            ignore_patterns=[".*.tmp"],
            commit_message=commit_message or f"Upload {config.get('type')} policy",
        )
        api.upload_file(
            path_or_fileobj=model_card(config, repo_id).encode(),
            path_in_repo="README.md",
            repo_id=repo_id,
            repo_type="model",
            commit_message="Model card",
        )
    except (HfHubHTTPError, OSError, ValueError) as err:
        raise HubPushError(f"push of {directory} to {repo_id} failed: {err}") from None
    return str(url)


class DatasetSourceError(TrainingError):
    """A `--dataset` value is neither a local dataset folder nor a Hub dataset that can be fetched."""


def resolve_dataset(value: str | Path, *, revision: str | None = None) -> Path:
    """A local dataset folder for `value`: the folder itself, or a Hub dataset repo id (`user/name`) from the Hugging
    Face cache, downloaded there when not cached (`lerobot_dataset.hub.resolve_dataset_root`)."""
    from lerobot_dataset.hub import HubError, resolve_dataset_root

    try:
        return resolve_dataset_root(value, revision=revision)
    except HubError as err:
        raise DatasetSourceError(f"--dataset {err}") from None
