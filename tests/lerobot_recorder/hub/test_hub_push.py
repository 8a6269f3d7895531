"""Hub push: the requests our code makes, checked against a patched HfApi (a recording fake).

No test touches the network: `push_dataset` gets a fake API object, and the CLI test patches
`huggingface_hub.HfApi` with the same fake.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from huggingface_hub.errors import RevisionNotFoundError

from lerobot_dataset.hub import IGNORE_PATTERNS, HubError, dataset_card, push_dataset
from lerobot_ros.command import CommandError

INFO = {"codebase_version": "v3.0", "robot_type": "so101_follower", "total_episodes": 2, "total_frames": 60, "fps": 30}


class _TagNotFound:
    """What huggingface_hub's HTTP errors read from a 404 response."""

    headers: dict[str, str] = {}  # noqa: RUF012
    request = None
    status_code = 404


class RecordingHfApi:
    """Stands in for huggingface_hub.HfApi: records every call, uploads nothing."""

    def __init__(self, *, tag_exists: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.tag_exists = tag_exists
        self.uploaded: list[str] = []

    def create_repo(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        return f"https://huggingface.co/datasets/{repo_id}"

    def create_branch(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_branch", {"repo_id": repo_id, **kwargs}))

    def upload_folder(self, **kwargs: Any) -> None:
        self.calls.append(("upload_folder", kwargs))
        root = Path(kwargs["folder_path"])
        ignored = [p.rstrip("/*") for p in kwargs["ignore_patterns"]]
        self.uploaded = sorted(
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and not any(str(p.relative_to(root)).startswith(i) for i in ignored if not i.startswith("*"))
        )

    def upload_file(self, **kwargs: Any) -> None:
        self.calls.append(("upload_file", kwargs))

    def delete_tag(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("delete_tag", {"repo_id": repo_id, **kwargs}))
        if not self.tag_exists:
            raise RevisionNotFoundError("no such tag", response=_TagNotFound())

    def create_tag(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_tag", {"repo_id": repo_id, **kwargs}))


def _dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(INFO))
    (root / "data" / "chunk-000").mkdir(parents=True)
    (root / "data" / "chunk-000" / "file-000.parquet").write_bytes(b"PAR1")
    (root / ".lerobot_ros_staging").mkdir()
    (root / ".lerobot_ros_staging" / "writer.lock").write_text("")
    return root


def test_push_follows_lerobot_push_to_hub(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    api = RecordingHfApi()
    url = push_dataset(root, "me/so101_pick", private=True, api=api)
    assert url == "https://huggingface.co/datasets/me/so101_pick"
    names = [name for name, _ in api.calls]
    assert names == ["create_repo", "upload_folder", "upload_file", "delete_tag", "create_tag"]
    calls = dict(api.calls)
    assert calls["create_repo"] == {
        "repo_id": "me/so101_pick",
        "private": True,
        "repo_type": "dataset",
        "exist_ok": True,
    }
    assert calls["upload_folder"]["repo_type"] == "dataset" and calls["upload_folder"]["folder_path"] == root
    assert "images/" in calls["upload_folder"]["ignore_patterns"]
    assert api.uploaded == ["data/chunk-000/file-000.parquet", "meta/info.json"]  # no writer staging files
    card = calls["upload_file"]
    assert card["path_in_repo"] == "README.md" and card["repo_type"] == "dataset"
    front = yaml.safe_load(card["path_or_fileobj"].decode().split("---\n")[1])
    assert front["tags"][0] == "LeRobot" and front["task_categories"] == ["robotics"]
    assert front["configs"] == [{"config_name": "default", "data_files": "data/*/*.parquet"}]
    assert calls["create_tag"] == {"repo_id": "me/so101_pick", "tag": "v3.0", "revision": None, "repo_type": "dataset"}


def test_existing_tag_is_replaced_and_branch_is_created(tmp_path: Path) -> None:
    api = RecordingHfApi(tag_exists=True)
    push_dataset(_dataset(tmp_path), "me/ds", branch="dev", api=api)
    names = [name for name, _ in api.calls]
    assert names == ["create_repo", "create_branch", "upload_folder", "upload_file", "delete_tag", "create_tag"]
    assert dict(api.calls)["create_tag"]["revision"] == "dev"


def test_bad_root_and_repo_id(tmp_path: Path) -> None:
    with pytest.raises(HubError, match=r"no meta/info\.json"):
        push_dataset(tmp_path, "me/ds", api=RecordingHfApi())
    with pytest.raises(HubError, match="user_or_org/name"):
        push_dataset(_dataset(tmp_path), "just-a-name", api=RecordingHfApi())


def test_card_carries_the_schema() -> None:
    card = dataset_card(INFO, "me/ds", tags=["so101"])
    assert '"robot_type": "so101_follower"' in card and 'LeRobotDataset("me/ds")' in card
    assert yaml.safe_load(card.split("---\n")[1])["tags"] == ["LeRobot", "so101"]


def test_dataset_push_cli_uses_hfapi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    import huggingface_hub

    from lerobot_recorder.dataset_command import COMMAND

    api = RecordingHfApi()
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: api)
    parser = argparse.ArgumentParser()
    COMMAND.add_arguments(parser)
    args = parser.parse_args(["push", str(_dataset(tmp_path)), "me/ds", "--private"])
    assert COMMAND.run(args) == 0
    assert "pushed" in capsys.readouterr().out
    assert dict(api.calls)["create_repo"]["private"] is True
    with pytest.raises(CommandError, match=r"no meta/info\.json"):
        COMMAND.run(parser.parse_args(["push", str(tmp_path / "missing"), "me/ds"]))


def test_ignore_patterns_cover_staging() -> None:
    assert any(p.startswith(".lerobot_ros_staging") for p in IGNORE_PATTERNS)


def test_bag2dataset_push_to_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """`bag2dataset --push-to-hub` converts, then pushes through the (patched) HfApi."""
    import huggingface_hub

    from lerobot_bags.bag_command import BAG2DATASET
    from lerobot_bags.synthetic import SyntheticBagSpec, contract_for, write_synthetic_bag

    spec = SyntheticBagSpec(duration_s=0.2, height=24, width=32, cameras=("front",))
    bag = write_synthetic_bag(tmp_path / "bag", spec)
    contract_path = tmp_path / "contract.yaml"
    contract_path.write_text(yaml.safe_dump(contract_for(spec, camera_dtype="image").to_dict()))
    api = RecordingHfApi()
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: api)
    parser = argparse.ArgumentParser()
    BAG2DATASET.add_arguments(parser)
    root = tmp_path / "ds"
    argv = [str(bag), "--contract", str(contract_path), "--output", str(root), "--task", "t", "--push-to-hub", "me/x"]
    assert BAG2DATASET.run(parser.parse_args([*argv, "--quiet"])) == 0
    assert "pushed to https://huggingface.co/datasets/me/x" in capsys.readouterr().out
    assert api.calls[0][0] == "create_repo"
    assert dict(api.calls)["upload_folder"]["folder_path"] == root
    assert json.loads((root / "meta" / "info.json").read_text())["total_episodes"] == 1
