"""`colcon build` of ros_ws, the sim bridge, training and the policy server works the way a ROS 2 user would run it
(colcon from PyPI); docs/contributing.md, "Running with a ROS 2 install":
`colcon build --base-paths ros_ws/src sim_bridge training policy_server`.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "ros_ws" / "src"
VENV = Path(sys.prefix)
SOURCES = {
    "lerobot_ros": SRC / "lerobot_ros",
    "lerobot_contract": SRC / "lerobot_contract",
    "lerobot_dataset": SRC / "lerobot_dataset",
    "lerobot_bags": SRC / "lerobot_bags",
    "lerobot_drivers": SRC / "lerobot_drivers",
    "lerobot_policy_node": SRC / "lerobot_policy_node",
    "lerobot_recorder": SRC / "lerobot_recorder",
    "lerobot_sim_bridge": REPO / "sim_bridge",
    "lerobot_eval": SRC / "lerobot_eval",
    "lerobot_training": REPO / "training",
    "lerobot_policy_server": REPO / "policy_server",
}
PYTHON_PACKAGES = list(SOURCES)
# No executables of their own: imported by the others (contract, dataset, training), lerobot-ros sub-commands only
# (eval, bags, training).
LIBRARIES = {"lerobot_contract", "lerobot_dataset", "lerobot_bags", "lerobot_eval", "lerobot_training"}


def console_scripts(package: str) -> list[str]:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(SOURCES[package] / "setup.cfg")
    lines = cfg.get("options.entry_points", "console_scripts", fallback="").strip().splitlines()
    return [line.split("=")[0].strip() for line in lines if line.strip()]


# One colcon build of every package (minutes): run by `make test-extended` (and CI); `make test-install` and the
# ament prefix tests cover the installed layout in the default run.
pytestmark = pytest.mark.extended


@pytest.fixture(scope="module")
def colcon_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("colcon_ws")
    env = dict(os.environ, AMENT_PREFIX_PATH=str(VENV), CMAKE_PREFIX_PATH=str(VENV))
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        [
            str(VENV / "bin" / "colcon"),
            "build",
            "--base-paths",
            str(SRC),
            str(REPO / "sim_bridge"),
            str(REPO / "training"),
            str(REPO / "policy_server"),
            "--build-base",
            str(ws / "build"),
            "--install-base",
            str(ws / "install"),
            "--cmake-args",
            f"-DPython3_EXECUTABLE={VENV / 'bin' / 'python'}",
            "-DBUILD_TESTING=OFF",
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"colcon build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    finished = sorted(line.split()[2] for line in result.stdout.splitlines() if line.startswith("Finished <<<"))
    assert finished == sorted([*PYTHON_PACKAGES, "lerobot_msgs"]), result.stdout[-2000:]
    return ws / "install"


def test_every_package_is_built_and_indexed(colcon_install: Path) -> None:
    for package in [*PYTHON_PACKAGES, "lerobot_msgs"]:
        assert (colcon_install / package / "share" / "ament_index" / "resource_index" / "packages" / package).exists()
        assert (colcon_install / package / "share" / package / "package.xml").exists()


def test_interfaces_are_generated(colcon_install: Path) -> None:
    site = colcon_install / "lerobot_msgs" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    generated = site / "site-packages" / "lerobot_msgs"
    modules = ["msg/_action_chunk.py", "msg/_recorder_status.py", "msg/_policy_status.py", "msg/_step_outcome.py"]
    modules += ["srv/_reset_env.py", "action/_record_episode.py"]
    for module in modules:
        assert (generated / module).exists(), module
    assert (colcon_install / "lerobot_msgs" / "share" / "lerobot_msgs" / "msg" / "ActionChunk.msg").exists()


def test_launch_and_config_land_in_share(colcon_install: Path) -> None:
    checked = 0
    for package in PYTHON_PACKAGES:
        for folder in ["launch", "config"]:
            for source in sorted((SOURCES[package] / folder).glob("*")):
                if source.is_file():
                    assert (colcon_install / package / "share" / package / folder / source.name).exists(), source
                    checked += 1
    assert checked >= 1  # at least the DDS profile


def test_console_scripts_land_in_lib_package(colcon_install: Path) -> None:
    for package in PYTHON_PACKAGES:
        scripts = console_scripts(package)
        assert bool(scripts) != (package in LIBRARIES), package
        for script in scripts:
            path = colcon_install / package / "lib" / package / script
            assert path.is_file() and os.access(path, os.X_OK), f"{package}/{script}"
    assert (colcon_install / "lerobot_ros" / "lib" / "lerobot_ros" / "lerobot-ros").exists()


def install_environment(install: Path) -> dict[str, str]:
    """The environment with the PYTHONPATH `install/setup.bash` sets (the workspace's packages first)."""
    paths = [
        str(install / p / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages")
        for p in [*PYTHON_PACKAGES, "lerobot_msgs"]
    ]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONNOUSERSITE="1")


def test_installed_executables_run(colcon_install: Path) -> None:
    # What `ros2 run lerobot_sim_bridge sim_render_meshes --help` runs, with the PYTHONPATH `install/setup.bash` sets.
    env = install_environment(colcon_install)
    for package, exe in [
        ("lerobot_sim_bridge", "sim_render_meshes"),
        ("lerobot_drivers", "fake_servo_bus"),
        ("lerobot_ros", "lerobot-ros"),
        ("lerobot_policy_server", "lerobot-policy-server"),
    ]:
        result = subprocess.run(
            [str(colcon_install / package / "lib" / package / exe), "--help"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, f"{package}/{exe}: {result.stderr[-2000:]}"
        assert "usage:" in result.stdout


def test_the_policy_node_imports_training_and_the_server_client_from_the_workspace(colcon_install: Path) -> None:
    # Both executables of lerobot_policy_node import lerobot_training when they load (and the policy node the policy
    # server's client for grpc://): on a ROS install they come from the workspace the node was built in.
    modules = ["lerobot_training", "lerobot_policy_server.client"]
    code = "import importlib, lerobot_policy_node.nodes.policy_node, lerobot_policy_node.nodes.executor_node\n"
    code += f"for name in {modules!r}: print(importlib.import_module(name).__file__)\n"
    result = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", code],
        env=install_environment(colcon_install),
        cwd=colcon_install,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = [Path(line) for line in result.stdout.split()]
    assert len(found) == len(modules), result.stdout
    for module, path in zip(modules, found, strict=True):
        assert path.is_relative_to(colcon_install), f"{module} imported from {path}, not from the colcon install"
