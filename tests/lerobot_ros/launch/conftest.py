"""Fixtures for the launch runner tests: a fake install prefix with an ament index, and a planner on it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from real_launch import OracleUnavailable, install_real_launch

from lerobot_ros.launch.description import LaunchPlan
from lerobot_ros.launch.packages import PACKAGES_INDEX, PackageIndex
from lerobot_ros.launch.parser import plan_launch


@pytest.fixture
def fake_prefix(tmp_path: Path) -> Path:
    """`prefix/` with package `fakepkg`: executable `fake_node`, a params file and an included launch file."""
    prefix = tmp_path / "prefix"
    (prefix / PACKAGES_INDEX).mkdir(parents=True)
    (prefix / PACKAGES_INDEX / "fakepkg").write_text("")
    lib = prefix / "lib" / "fakepkg"
    lib.mkdir(parents=True)
    (lib / "fake_node").write_text("#!/bin/sh\nexit 0\n")
    (lib / "fake_node").chmod(0o755)
    share = prefix / "share" / "fakepkg"
    (share / "config").mkdir(parents=True)
    (share / "config" / "params.yaml").write_text("/**:\n  ros__parameters:\n    rate_hz: 20.0\n")
    return prefix


@pytest.fixture
def index(fake_prefix: Path, tmp_path: Path) -> PackageIndex:
    return PackageIndex(prefixes=[fake_prefix], console_scripts=[], scripts_dir=tmp_path / "bin")


@pytest.fixture
def write_launch(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a launch file (dedented) under tmp_path and return its path."""

    def write(text: str, name: str = "test.launch.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write


@pytest.fixture
def plan(index: PackageIndex, tmp_path: Path) -> Callable[..., LaunchPlan]:
    """Plan a launch file with the fake index, an empty-ish environment and tmp_path as cwd."""

    def run(
        path: Path, arguments: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
    ) -> LaunchPlan:
        return plan_launch(
            path,
            dict(arguments or {}),
            package_share=index.package_share,
            package_prefix=index.package_prefix,
            find_executable=index.executable,
            environ={"PATH": "/usr/bin:/bin", **(environ or {})},
            cwd=tmp_path,
        )

    return run


@pytest.fixture(scope="session")
def oracle() -> Path:
    """The install dir of the real launch/launch_ros (real_launch.py); the test skips without ../shared."""
    try:
        return install_real_launch()
    except OracleUnavailable as err:
        pytest.skip(str(err))
