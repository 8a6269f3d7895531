"""The packages installed NON-editable (copies, no checkout behind them) still find their contracts, robot configs
and launch files: `lerobot-ros eval --help`, `lerobot-ros launch --print` of the sim launch files and a contract
load, all from a scratch prefix (issue 15 item 4).

The scratch environment is a venv without pip whose only link to this one is a .pth naming this venv's
site-packages, for the third-party packages (numpy, yaml, rclpy, ...): the .pth files there (this venv's editable
finders) do not run, so our packages import from the scratch copies, which the tests check. Nothing is downloaded
(`pip --no-index --no-deps`). About 30-40 s (building nine wheels), so it runs with LEROBOT_ROS_INSTALL_TEST=1
(`make test-install`); tests/lerobot_ros/test_share.py is the quick default-run part.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = [
    "ros_ws/src/lerobot_ros",
    "ros_ws/src/lerobot_contract",
    "ros_ws/src/lerobot_dataset",
    "ros_ws/src/lerobot_drivers",
    "ros_ws/src/lerobot_bags",
    "ros_ws/src/lerobot_recorder",
    "ros_ws/src/lerobot_policy_node",
    "training",
    "sim_bridge",
    "ros_ws/src/lerobot_eval",
    "policy_server",
]

pytestmark = [
    pytest.mark.install,
    pytest.mark.skipif(
        os.environ.get("LEROBOT_ROS_INSTALL_TEST") != "1",
        reason="about 40 s (nine wheel builds): make test-install (LEROBOT_ROS_INSTALL_TEST=1) runs it",
    ),
]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch venv with every package of the repository installed as copies (not editable)."""
    root = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    venv = root / "venv"
    scratch_python = venv / "bin" / "python"
    site = subprocess.run(
        [str(scratch_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "this_venv_third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    sources = []
    for package in PACKAGES:
        # A copy with links resolved: what an sdist or a colcon build (without --symlink-install) sees.
        copy = root / "src" / Path(package).name
        shutil.copytree(REPO / package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        sources.append(str(copy))
    pip = [sys.executable, "-m", "pip", "--python", str(scratch_python), "install", "--quiet"]
    pip += ["--disable-pip-version-check", "--no-index", "--no-deps", "--no-build-isolation", *sources]
    subprocess.run(pip, check=True, cwd=root)
    # What scripts/setup.sh does for the editable install, for the executables only (the wheels installed share/).
    subprocess.run(
        [sys.executable, str(REPO / "scripts/ament_prefix.py"), "--executables-only", str(venv), str(scratch_python),
         *sources],
        check=True, capture_output=True,
    )  # fmt: skip
    shutil.rmtree(root / "src")  # nothing of the sources is left to fall back on
    return venv


def _run(venv: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("AMENT_PREFIX_PATH", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(argv), env=env, cwd=venv, capture_output=True, text=True, timeout=120, check=False)


def test_our_packages_import_from_the_installed_copies(prefix: Path) -> None:
    # The policy node's executables import lerobot_training (and its client lerobot_policy_server) when they load.
    modules = [
        "lerobot_ros",
        "lerobot_eval",
        "lerobot_policy_node.nodes.policy_node",
        "lerobot_policy_node.nodes.executor_node",
        "lerobot_sim_bridge",
        "lerobot_training",
        "lerobot_policy_server.client",
    ]
    code = f"import importlib\nfor name in {modules!r}: print(importlib.import_module(name).__file__)"
    result = _run(prefix, str(prefix / "bin" / "python"), "-c", code)
    assert result.returncode == 0, result.stderr
    found = result.stdout.split()
    assert len(found) == len(modules), result.stdout
    for module, path in zip(modules, found, strict=True):
        assert Path(path).is_relative_to(prefix), f"{module}: {path}"


def test_eval_and_demo_help(prefix: Path) -> None:
    for command in ("eval", "demo"):
        result = _run(prefix, str(prefix / "bin" / "lerobot-ros"), command, "--help")
        assert result.returncode == 0, result.stderr
        assert f"usage: lerobot-ros {command}" in result.stdout
        assert "unavailable" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("launch_file", "arguments"),
    [
        ("sim.launch.yaml", []),
        ("sim_policy.launch.yaml", ["checkpoint:=scripted"]),
        ("sim_record.launch.yaml", ["root:=/tmp/never-written"]),
    ],
)
def test_launch_print_of_the_sim_files_resolves_inside_the_prefix(
    prefix: Path, launch_file: str, arguments: list[str]
) -> None:
    lerobot_ros = str(prefix / "bin" / "lerobot-ros")
    result = _run(prefix, lerobot_ros, "launch", "--print", "lerobot_ros", launch_file, *arguments)
    assert result.returncode == 0, result.stderr
    assert str(REPO) not in result.stdout, "a path of the checkout in an installed plan"
    share = prefix / "share" / "lerobot_ros"
    assert f"{share}/launch/{launch_file}" in result.stdout
    if launch_file != "sim.launch.yaml":  # sim_policy and sim_record default to the installed sim contract
        assert f"{share}/launch/../config/contracts/so101_sim.yaml" in result.stdout


def test_the_sim_contract_loads_from_the_installed_share(prefix: Path) -> None:
    code = (
        "from lerobot_contract import Contract\n"
        "from lerobot_eval.evaluation import DEFAULT_CONTRACT\n"
        "from lerobot_ros import share\n"
        "path = share.find(DEFAULT_CONTRACT)\n"
        "contract = Contract.load(path)\n"
        "print(path, contract.fps, sorted(contract.features))\n"
    )
    result = _run(prefix, str(prefix / "bin" / "python"), "-c", code)
    assert result.returncode == 0, result.stderr
    path, fps, _ = result.stdout.split(" ", 2)
    assert Path(path) == prefix / "share" / "lerobot_ros" / "config" / "contracts" / "so101_sim.yaml"
    assert float(fps) == 30 and "'action'" in result.stdout
