"""Package lookup through the ament index, where ros2 launch looks (console scripts do not count)."""

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


def test_console_scripts_are_not_executables_of_a_package(fake_prefix: Path, tmp_path: Path) -> None:
    """As ros2 launch: only <prefix>/lib/<pkg>/<exec> counts (a console script used to, before issue 16)."""
    scripts = tmp_path / "bin"
    tool = _script(scripts, "tool")
    _script(scripts, "pure")
    index = PackageIndex(
        prefixes=[fake_prefix],
        console_scripts=[
            EntryPoint(name="tool", value="fakepkg.tool:main", group="console_scripts"),
            EntryPoint(name="pure", value="purepy.cli:main", group="console_scripts"),
        ],
        scripts_dir=scripts,
    )
    with pytest.raises(ExecutableNotFoundError) as excinfo:
        index.executable("fakepkg", "tool")
    message = str(excinfo.value)
    assert f"package 'fakepkg' has no executable 'tool' in {fake_prefix}/lib/fakepkg (it has: fake_node)" in message
    assert f"{tool} is a console script, which ros2 launch does not look for" in message
    with pytest.raises(PackageNotFoundError, match="'purepy' is not in the ament index"):
        index.executable("purepy", "pure")  # a Python package outside the index is not a ROS package


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
