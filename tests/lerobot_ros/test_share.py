"""`lerobot_ros.share.find`: package data through the ament index first, then an editable install's source folder;
and every contract, robot config and top-level launch file is one that lerobot_ros installs.

(The non-editable install itself: tests/ros_ws/test_non_editable_install.py, `make test-install`.)
"""

from __future__ import annotations

import configparser
import glob
import sys
from pathlib import Path

import pytest

from lerobot_ros import share

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ros_ws" / "src" / "lerobot_ros"
CONTRACT = "config/contracts/so101_sim.yaml"


def _prefix(root: Path, package: str, files: dict[str, str]) -> Path:
    """An install prefix whose ament index lists `package`, with `files` in its share folder."""
    (root / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (root / "share" / "ament_index" / "resource_index" / "packages" / package).touch()
    for relative, text in files.items():
        path = root / "share" / package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_first_prefix_of_ament_prefix_path_that_lists_the_package_wins(tmp_path: Path) -> None:
    unlisted = tmp_path / "unlisted"  # has the file but no index marker: not an install of lerobot_ros
    (unlisted / "share" / "lerobot_ros" / "config" / "contracts").mkdir(parents=True)
    (unlisted / "share" / "lerobot_ros" / CONTRACT).write_text("unlisted")
    first = _prefix(tmp_path / "first", "lerobot_ros", {CONTRACT: "first"})
    second = _prefix(tmp_path / "second", "lerobot_ros", {CONTRACT: "second"})
    environ = {"AMENT_PREFIX_PATH": f"{unlisted}:{first}:{second}"}
    assert share.find(CONTRACT, environ=environ).read_text() == "first"


def test_a_listed_prefix_without_the_file_is_passed_over(tmp_path: Path) -> None:
    empty = _prefix(tmp_path / "empty", "lerobot_ros", {})
    other = _prefix(tmp_path / "other", "lerobot_ros", {CONTRACT: "other"})
    assert share.find(CONTRACT, environ={"AMENT_PREFIX_PATH": f"{empty}:{other}"}).read_text() == "other"


def test_without_an_index_entry_the_editable_source_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # an environment that registered nothing
    found = share.find(CONTRACT, environ={})
    assert found == PACKAGE / CONTRACT
    assert found.read_bytes() == (REPO / CONTRACT).read_bytes()


def test_a_missing_file_is_one_error_naming_where_it_looked(tmp_path: Path) -> None:
    listed = _prefix(tmp_path / "p", "lerobot_ros", {})
    with pytest.raises(share.ShareFileNotFoundError) as info:
        share.find("config/contracts/nope.yaml", environ={"AMENT_PREFIX_PATH": str(listed)})
    message = str(info.value)
    assert "\n" not in message
    assert f"{listed}/share/lerobot_ros/config/contracts/nope.yaml" in message
    assert "AMENT_PREFIX_PATH" in message


@pytest.mark.parametrize("relative", ["../secrets.yaml", "/etc/passwd", "config/../../x.yaml"])
def test_a_path_outside_the_share_folder_is_refused(relative: str) -> None:
    with pytest.raises(ValueError, match="inside the package's share folder"):
        share.find(relative)


def _installed_names() -> set[str]:
    """share/lerobot_ros-relative paths of the files lerobot_ros's setup.cfg installs."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(PACKAGE / "setup.cfg")
    names = set()
    for target, sources in cfg.items("options.data_files"):
        if not target.startswith("share/lerobot_ros"):
            continue
        folder = target.removeprefix("share/lerobot_ros").strip("/")
        for pattern in sources.split():
            for path in glob.glob(str(PACKAGE / pattern)):
                if Path(path).is_file():
                    names.add(str(Path(folder) / Path(path).name))
    return names


def test_every_contract_robot_config_and_launch_file_is_installed_with_lerobot_ros() -> None:
    shipped = {
        str(path.relative_to(REPO))
        for pattern in ("config/contracts/*.yaml", "config/robots/*.yaml", "launch/*.launch.yaml")
        for path in REPO.glob(pattern)
    }
    missing = shipped - _installed_names()
    assert not missing, (
        f"not installed with lerobot_ros: {sorted(missing)}; link them into ros_ws/src/lerobot_ros (launch/) so "
        "share/lerobot_ros has them"
    )
    for relative in shipped:  # and the links lead to the same files
        assert (PACKAGE / relative).read_bytes() == (REPO / relative).read_bytes()
