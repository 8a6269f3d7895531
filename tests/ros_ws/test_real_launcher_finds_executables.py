"""With the venv as the only ament prefix, the real launch_ros resolves every pkg/exec of our launch files and packages.

The oracle is the unmodified ros2/launch + launch_ros in ../shared/oracles/ros2-launch (installed once into a
cache folder in the venv). Its ExecutableInPackage is what `ros2 launch` and `ros2 run` use to find a node's
executable (<prefix>/lib/<pkg>/<exec>, found through the ament index); FindPackageShare is `$(find-pkg-share)`.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ORACLE = REPO.parent / "shared" / "oracles" / "ros2-launch"
VENV = Path(sys.prefix)
PACKAGE_DIRS = [
    *sorted(p for p in (REPO / "ros_ws" / "src").iterdir() if (p / "setup.cfg").is_file()),
    REPO / "sim_bridge",
]
LAUNCH_FILES = sorted([*(REPO / "launch").glob("*.launch.yaml"), *(REPO / "ros_ws" / "src").glob("*/launch/*.yaml")])

RESOLVE = r"""
import json, os, sys
from launch import LaunchContext
from launch_ros.substitutions import ExecutableInPackage, FindPackageShare
out = {}
for pkg, exe in json.loads(sys.argv[1]):
    try:
        out[f"{pkg}/{exe}"] = ExecutableInPackage(exe, pkg).perform(LaunchContext())
    except Exception as err:
        out[f"{pkg}/{exe}"] = f"ERROR {type(err).__name__}: {err}"
for pkg in json.loads(sys.argv[2]):
    try:
        out[f"share:{pkg}"] = FindPackageShare(pkg).perform(LaunchContext())
    except Exception as err:
        out[f"share:{pkg}"] = f"ERROR {type(err).__name__}: {err}"
print(json.dumps(out))
"""


def node_entries(tree: Any) -> list[tuple[str, str]]:
    """(pkg, exec) of every node in a parsed launch file, at any depth (groups, conditions)."""
    found = []
    if isinstance(tree, dict):
        if isinstance(tree.get("pkg"), str) and isinstance(tree.get("exec"), str):
            found.append((tree["pkg"], tree["exec"]))
        for value in tree.values():
            found.extend(node_entries(value))
    elif isinstance(tree, list):
        for value in tree:
            found.extend(node_entries(value))
    return found


def launch_references() -> tuple[list[tuple[str, str]], list[str]]:
    execs: set[tuple[str, str]] = set()
    shares: set[str] = set()
    for path in LAUNCH_FILES:
        text = path.read_text()
        execs.update(node_entries(yaml.safe_load(text)))
        shares.update(re.findall(r"\$\(find-pkg-share ([A-Za-z0-9_]+)\)", text))
    return sorted(execs), sorted(shares)


def console_scripts() -> list[tuple[str, str]]:
    """(package, executable) of every console script: what `ros2 run <pkg> <exec>` must find."""
    out = []
    for source in PACKAGE_DIRS:
        package = re.search(r"<name>\s*([^<\s]+)\s*</name>", (source / "package.xml").read_text())
        assert package is not None, source
        cfg = configparser.ConfigParser(interpolation=None)
        cfg.read(source / "setup.cfg")
        for line in cfg.get("options.entry_points", "console_scripts", fallback="").splitlines():
            if line.strip():
                out.append((package.group(1), line.split("=")[0].strip()))
    return out


@pytest.fixture(scope="module")
def oracle() -> Path:
    if not (ORACLE / "install.sh").is_file():
        pytest.skip(f"the real launch sources are not here ({ORACLE}): needs the shared/ folder beside the repo")
    digest = hashlib.sha256((ORACLE / "README.md").read_bytes() + (ORACLE / "install.sh").read_bytes()).hexdigest()
    target = VENV / ".cache" / f"ros2-launch-oracle-{digest[:12]}"
    if not (target / "launch_ros").is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=target.parent))
        result = subprocess.run(
            ["bash", str(ORACLE / "install.sh"), sys.executable, str(scratch / "pkgs")],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, f"installing the oracle failed:\n{result.stderr[-3000:]}"
        try:
            (scratch / "pkgs").rename(target)  # atomic: a parallel run either finds it complete or not at all
        except OSError:
            assert (target / "launch_ros").is_dir()
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def test_launch_files_name_nodes() -> None:
    execs, shares = launch_references()
    assert len(execs) >= 10, execs  # the scan sees the nodes (a scan that finds nothing would pass vacuously)
    assert {pkg for pkg, _ in execs} >= {"lerobot_drivers", "lerobot_sim_bridge", "lerobot_recorder"}
    assert all("$(" not in pkg + exe for pkg, exe in execs)  # literal names: resolvable without arguments
    assert shares


@pytest.mark.slow
def test_real_launcher_resolves_every_executable_with_the_venv_prefix_alone(oracle: Path) -> None:
    execs, shares = launch_references()
    execs = sorted({*execs, *console_scripts()})  # the launch files' nodes and every `ros2 run` target
    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH", "PYTHONPATH")}
    env.update(AMENT_PREFIX_PATH=str(VENV), PYTHONPATH=str(oracle))
    result = subprocess.run(
        [sys.executable, "-c", RESOLVE, json.dumps(execs), json.dumps(shares)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    resolved = json.loads(result.stdout)
    failures = {k: v for k, v in resolved.items() if v.startswith("ERROR")}
    assert not failures, "the real launcher cannot resolve (re-run scripts/setup.sh):\n" + "\n".join(
        f"  {k}: {v}" for k, v in failures.items()
    )
    for pkg, exe in execs:
        path = Path(resolved[f"{pkg}/{exe}"])
        assert path == VENV / "lib" / pkg / exe
        assert os.access(path, os.X_OK)
    for pkg in shares:
        assert Path(resolved[f"share:{pkg}"]) == VENV / "share" / pkg
        assert (VENV / "share" / pkg / "launch").is_dir()
