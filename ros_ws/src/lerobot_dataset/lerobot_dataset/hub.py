"""Upload a LeRobot v3 dataset to the Hugging Face Hub the way LeRobot's `LeRobotDataset.push_to_hub` does, and
find the local folder of a Hub dataset repo id (`resolve_dataset_root`).

The sequence (lerobot 0.4.4): `create_repo(repo_type="dataset", exist_ok=True)`, `upload_folder` of the
dataset root (temporary `images/` and this project's writer staging folder left out), a dataset card
(`README.md`: tags `LeRobot`, task category `robotics`, a `default` config over `data/*/*.parquet`, and
meta/info.json in the body), then the `v3.0` tag (the codebase version; an old tag of that name is replaced).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

CODEBASE_VERSION = "v3.0"
IGNORE_PATTERNS = ["images/", ".lerobot_ros_staging/", ".lerobot_ros_staging/*", "*.tmp"]


class HubError(Exception):
    """The dataset could not be pushed: names the repo and what failed."""


def dataset_card(info: dict[str, Any], repo_id: str, tags: list[str] | None = None, license: str = "apache-2.0") -> str:
    """README.md text of the dataset (YAML front matter as LeRobot writes it, then the schema)."""
    import yaml

    header = {
        "license": license,
        "task_categories": ["robotics"],
        "tags": ["LeRobot", *(tags or [])],
        "configs": [{"config_name": "default", "data_files": "data/*/*.parquet"}],
    }
    body = [
        f"This dataset was created with [lerobot-ros](https://github.com/huggingface/lerobot) tools "
        f"(LeRobot dataset format {info.get('codebase_version', CODEBASE_VERSION)}).",
        "",
        f"- robot_type: {info.get('robot_type')}",
        f"- episodes: {info.get('total_episodes')}, frames: {info.get('total_frames')}, fps: {info.get('fps')}",
        "",
        "## Dataset Structure",
        "",
        "[meta/info.json](meta/info.json):",
        "```json",
        json.dumps(info, indent=4),
        "```",
        "",
        "## Loading",
        "",
        "```python",
        "from lerobot.datasets.lerobot_dataset import LeRobotDataset",
        f'dataset = LeRobotDataset("{repo_id}")',
        "```",
        "",
    ]
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + "\n".join(body)


def push_dataset(
    root: Path,
    repo_id: str,
    *,
    private: bool = False,
    tag: str = CODEBASE_VERSION,
    branch: str | None = None,
    tags: list[str] | None = None,
    api: Any = None,
) -> str:
    """Push the dataset at `root` to `repo_id`; returns the repo URL. `api` defaults to `huggingface_hub.HfApi()`."""
    root = Path(root)
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise HubError(f"{root} is not a LeRobot dataset (no meta/info.json); nothing pushed")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise HubError(f"repo id {repo_id!r} must look like 'user_or_org/name'")
    info = json.loads(info_path.read_text())
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError

    try:
        url = api.create_repo(repo_id, private=private, repo_type="dataset", exist_ok=True)
        if branch:
            api.create_branch(repo_id, branch=branch, repo_type="dataset", exist_ok=True)
        api.upload_folder(
            repo_id=repo_id,
            folder_path=root,
            repo_type="dataset",
            revision=branch,
            ignore_patterns=IGNORE_PATTERNS,
            commit_message=f"Upload LeRobot {info.get('codebase_version', CODEBASE_VERSION)} dataset",
        )
        api.upload_file(
            path_or_fileobj=dataset_card(info, repo_id, tags).encode(),
            path_in_repo="README.md",
            repo_id=repo_id,
            repo_type="dataset",
            revision=branch,
            commit_message="Dataset card",
        )
        if tag:
            with contextlib.suppress(RevisionNotFoundError):
                api.delete_tag(repo_id, tag=tag, repo_type="dataset")
            api.create_tag(repo_id, tag=tag, revision=branch, repo_type="dataset")
    except (HfHubHTTPError, OSError, ValueError) as err:
        raise HubError(f"push of {root} to {repo_id} failed: {err}") from None
    return str(url)


def looks_like_repo_id(value: str) -> bool:
    """`user_or_org/name` (not a relative path such as ./a or ~/a)."""
    parts = value.split("/")
    return len(parts) == 2 and all(parts) and not value.startswith((".", "~")) and "\\" not in value


def resolve_dataset_root(value: str | Path, *, revision: str | None = None) -> Path:
    """A local dataset folder for `value`: the folder itself, or a Hub dataset repo id (`user/name`) fetched with
    huggingface_hub's `snapshot_download` into the Hugging Face cache (HF_HUB_CACHE; with HF_HUB_OFFLINE=1 the
    cached snapshot is used without any network call). A local folder wins over a repo id of the same name; a value
    that is neither is returned as a path (the reader names the missing folder). Raises `HubError` naming `value`.
    """
    path = Path(value)
    if path.exists():
        return path
    text = str(value)
    if not looks_like_repo_id(text):
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        local = snapshot_download(repo_id=text, repo_type="dataset", revision=revision)
    except RepositoryNotFoundError:
        raise HubError(f"{text}: no such dataset on the Hub (or it is private: log in)") from None
    except LocalEntryNotFoundError:
        raise HubError(
            f"{text}: not in the local Hugging Face cache and the Hub cannot be reached "
            "(HF_HUB_OFFLINE=1 or no network); download it once online or pass a local folder"
        ) from None
    except (HfHubHTTPError, OSError, ValueError) as err:
        raise HubError(f"{text}: download failed: {err}") from None
    root = Path(local)
    if not (root / "meta" / "info.json").is_file():
        raise HubError(f"{text}: the Hub snapshot {root} holds no meta/info.json (not LeRobot v3)")
    return root
