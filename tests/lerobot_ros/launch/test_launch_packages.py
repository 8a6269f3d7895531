"""Package lookup: the ament index first, console scripts of installed distributions as the fallback."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from lerobot_ros.launch.errors import ExecutableNotFoundError, PackageNotFoundError
from lerobot_ros.launch.packages import PackageIndex, ament_prefixes


def _script(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_ament_lib_executable_and_share(fake_prefix: Path, index: PackageIndex) -> None:
    assert index.executable("fakepkg", "fake_node") == fake_prefix / "lib/fakepkg/fake_node"
    assert index.package_share("fakepkg") == fake_prefix / "share/fakepkg"
    assert index.package_prefix("fakepkg") == fake_prefix


def test_console_script_fallback_when_lib_dir_has_no_such_executable(fake_prefix: Path, tmp_path: Path) -> None:
    scripts = tmp_path / "bin"
    tool = _script(scripts, "tool")
    _script(scripts, "other_tool")
    index = PackageIndex(
        prefixes=[fake_prefix],
        console_scripts=[
            EntryPoint(name="tool", value="fakepkg.tool:main", group="console_scripts"),
            EntryPoint(name="pure", value="purepy.cli:main", group="console_scripts"),
            EntryPoint(name="other_tool", value="otherpkg.x:main", group="console_scripts"),
        ],
        scripts_dir=scripts,
    )
    assert index.executable("fakepkg", "tool") == tool
    with pytest.raises(ExecutableNotFoundError, match=r"has no executable 'other_tool' \(it has: fake_node, tool\)"):
        index.executable("fakepkg", "other_tool")  # belongs to another package
    # A Python package that is not in the ament index still resolves through its console scripts...
    _script(scripts, "pure")
    assert index.executable("purepy", "pure") == scripts / "pure"
    # ...but it has no share directory.
    with pytest.raises(PackageNotFoundError, match="'purepy' is not in the ament index"):
        index.package_share("purepy")


def test_unknown_package(index: PackageIndex) -> None:
    with pytest.raises(PackageNotFoundError, match="add its install prefix to AMENT_PREFIX_PATH"):
        index.executable("nopkg", "x")


def test_prefixes_include_sys_prefix_last(tmp_path: Path) -> None:
    assert ament_prefixes({"AMENT_PREFIX_PATH": f"{tmp_path}:/opt/ros"}) == [
        tmp_path,
        Path("/opt/ros"),
        Path(sys.prefix),
    ]
    assert ament_prefixes({"AMENT_PREFIX_PATH": sys.prefix}) == [Path(sys.prefix)]


def test_the_installed_project_resolves() -> None:
    index = PackageIndex()
    # The setup installs every node where ros2 run / ros2 launch look: <prefix>/lib/<pkg>/<exec>.
    assert index.executable("lerobot_ros", "demo_talker") == Path(sys.prefix) / "lib" / "lerobot_ros" / "demo_talker"
    assert (index.package_share("lerobot_ros") / "launch" / "talker.launch.yaml").is_file()
