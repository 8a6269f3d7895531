"""What ros2 launch does with paths, checked against the real launch/launch_ros (the oracle, see real_launch.py).

- An installed launch file is often a symbolic link into the source tree (colcon's symlink install):
  `$(dirname)` / `$(filename)` keep the path as given (launch's `os.path.abspath`), so
  `$(dirname)/../config` is the installed config, not the source tree's.
- A `param: from` file that is not a file is skipped with a warning and the node still starts; with
  `allow_substs: true` (the file is read to substitute it) the launch is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from real_launch import oracle_environment, plan_with_ours, resolve_with_ours, resolve_with_real_launch

from lerobot_ros.launch.description import LaunchPlan

PARAMS = "/**:\n  ros__parameters:\n    rate_hz: {rate}\n"


@pytest.fixture
def environment(oracle: Path, tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "AMENT_", "PYTEST_"))}
    base["ROS_LOG_DIR"] = str(tmp_path / "ros-log")
    return oracle_environment(oracle, base)


def _talker(params: str) -> str:
    return (
        "launch:\n- node:\n    pkg: lerobot_ros\n    exec: demo_talker\n    name: talker\n    param:\n"
        f"{params}"
        "    - {name: here, value: $(dirname)}\n    - {name: me, value: $(filename)}\n"
    )


def _generated(result: dict, name: str) -> object:
    for source in result["processes"][0]["parameters"]:
        for values in source.get("generated", {}).values():
            if name in values:
                return values[name]["value"]
    raise AssertionError(f"no parameter {name!r} in {result}")


def test_a_symlinked_launch_file_resolves_dirname_where_it_is_installed(oracle, environment, tmp_path) -> None:
    source = tmp_path / "src" / "pkg"
    share = tmp_path / "install" / "share" / "pkg"
    for tree, rate in ((source, 10.0), (share, 20.0)):
        (tree / "config").mkdir(parents=True)
        (tree / "launch").mkdir()
        (tree / "config" / "params.yaml").write_text(PARAMS.format(rate=rate))
    (source / "launch" / "talker.launch.yaml").write_text(_talker("    - {from: $(dirname)/../config/params.yaml}\n"))
    installed = share / "launch" / "talker.launch.yaml"
    installed.symlink_to(source / "launch" / "talker.launch.yaml")

    real, _ = resolve_with_real_launch(oracle, installed, {}, environment, tmp_path)
    assert real["ok"], real
    assert _generated(real, "here") == str(share / "launch") and _generated(real, "me") == str(installed)
    assert {"file": str(share / "launch/../config/params.yaml")} in real["processes"][0]["parameters"]
    assert resolve_with_ours(installed, {}, environment, tmp_path) == real


def test_a_params_file_that_is_not_a_file_is_skipped_with_a_warning(oracle, environment, tmp_path) -> None:
    (tmp_path / "config").mkdir()
    launch_file = tmp_path / "talker.launch.yaml"
    launch_file.write_text(
        _talker(
            "    - {name: first, value: 1}\n    - {from: $(dirname)/missing.yaml}\n    - {from: $(dirname)/config}\n"
        )
    )
    real, log = resolve_with_real_launch(oracle, launch_file, {}, environment, tmp_path)
    assert real["ok"], real
    assert f"Parameter file path is not a file: {tmp_path / 'missing.yaml'}" in log
    assert f"Parameter file path is not a file: {tmp_path / 'config'}" in log
    assert resolve_with_ours(launch_file, {}, environment, tmp_path) == real
    plan = plan_with_ours(launch_file, {}, environment, tmp_path)
    assert isinstance(plan, LaunchPlan)
    assert [w.split(": ", 2)[2].split(";")[0] for w in plan.warnings] == [
        f"Parameter file path is not a file: {tmp_path / 'missing.yaml'}",
        f"Parameter file path is not a file: {tmp_path / 'config'}",
    ]
    assert all(w.startswith(f"{launch_file}:") for w in plan.warnings)


def test_a_missing_params_file_to_substitute_is_refused_by_both(oracle, environment, tmp_path) -> None:
    launch_file = tmp_path / "talker.launch.yaml"
    launch_file.write_text(_talker("    - {from: $(dirname)/missing.yaml, allow_substs: true}\n"))
    real, _ = resolve_with_real_launch(oracle, launch_file, {}, environment, tmp_path)
    assert not real["ok"] and "No such file or directory" in real["error"]
    ours = resolve_with_ours(launch_file, {}, environment, tmp_path)
    assert not ours["ok"] and f"params file {tmp_path / 'missing.yaml'} does not exist" in ours["error"]
