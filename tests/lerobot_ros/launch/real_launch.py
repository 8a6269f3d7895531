"""The real ROS 2 launch frontend (launch + launch_ros) as an oracle: install it once, resolve files with it.

The sources are the unmodified upstream ones in `../shared/oracles/ros2-launch` (next to the
repository). `install_real_launch()` runs their `install.sh` with this interpreter into
`~/.cache/lerobot_ros/real-launch/<hash of the sources>` (once; later runs reuse it), and
`resolve_with_real_launch()` runs `real_launch_resolve.py` there, which prints the same JSON as
`lerobot_ros.launch.resolved.resolve_to_json`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lerobot_ros.launch.description import LaunchPlan
from lerobot_ros.launch.errors import LaunchError
from lerobot_ros.launch.packages import PackageIndex, ament_prefixes
from lerobot_ros.launch.parser import plan_launch
from lerobot_ros.launch.resolved import resolve_to_json

REPO = Path(__file__).resolve().parents[3]
ORACLE_SOURCES = REPO.parent / "shared" / "oracles" / "ros2-launch"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lerobot_ros" / "real-launch"
RESOLVER = Path(__file__).with_name("real_launch_resolve.py")


class OracleUnavailable(RuntimeError):
    """The oracle's sources are not next to the repository (a checkout without ../shared)."""


def _sources_hash() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(ORACLE_SOURCES.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ORACLE_SOURCES)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def install_real_launch() -> Path:
    """The install dir of the real launch frontend (installed on first use); `OracleUnavailable` without sources."""
    if not (ORACLE_SOURCES / "install.sh").is_file():
        raise OracleUnavailable(f"{ORACLE_SOURCES} is absent: the real launch_ros oracle cannot be installed")
    target = CACHE / _sources_hash()
    if (target / ".complete").is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs install once
        if (target / ".complete").is_file():
            return target
        scratch = target.with_name(target.name + ".partial")
        shutil.rmtree(scratch, ignore_errors=True)
        result = subprocess.run(
            ["bash", str(ORACLE_SOURCES / "install.sh"), sys.executable, str(scratch)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"installing the real launch frontend failed:\n{result.stdout}\n{result.stderr}")
        shutil.rmtree(target, ignore_errors=True)
        scratch.rename(target)
        (target / ".complete").write_text("")
    return target


def oracle_environment(install_dir: Path, base: Mapping[str, str]) -> dict[str, str]:
    """The environment both launchers resolve in: the venv is the ament prefix (and the oracle's own)."""
    env = dict(base)
    env["PYTHONPATH"] = str(install_dir)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(install_dir), sys.prefix])
    return env


def resolve_with_real_launch(
    install_dir: Path, launch_file: Path, arguments: Mapping[str, str], env: Mapping[str, str], cwd: Path
) -> tuple[dict[str, Any], str]:
    """The real launch_ros's resolution of `launch_file` (see real_launch_resolve.py), and what it logged."""
    argv: Sequence[str] = [f"{k}:={v}" for k, v in arguments.items()]
    result = subprocess.run(
        [sys.executable, str(RESOLVER), str(launch_file), *argv],
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=cwd,
        check=False,
        timeout=120,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the resolver printed no result:\n{result.stdout}\n{result.stderr}")
    log = "\n".join(line for line in (result.stdout + result.stderr).splitlines() if not line.startswith("{"))
    return json.loads(lines[-1]), log


def resolve_with_ours(
    launch_file: Path, arguments: Mapping[str, str], env: Mapping[str, str], cwd: Path
) -> dict[str, Any]:
    """lerobot-ros launch's resolution of `launch_file`, in the oracle's JSON format (an error: `ok` false)."""
    plan = plan_with_ours(launch_file, arguments, env, cwd)
    return plan if isinstance(plan, dict) else resolve_to_json(plan, env)


def plan_with_ours(
    launch_file: Path, arguments: Mapping[str, str], env: Mapping[str, str], cwd: Path
) -> LaunchPlan | dict[str, Any]:
    """lerobot-ros launch's plan of `launch_file` with the ament index of `env`; `{"ok": False, ...}` if refused."""
    index = PackageIndex(prefixes=ament_prefixes(env))
    try:
        return plan_launch(
            launch_file,
            dict(arguments),
            package_share=index.package_share,
            package_prefix=index.package_prefix,
            find_executable=index.executable,
            environ=env,
            cwd=cwd,
        )
    except LaunchError as err:
        return {"ok": False, "error": str(err)}


def resolve_many_with_real_launch(
    install_dir: Path, jobs: Sequence[tuple[Path, Mapping[str, str], Path]], env: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Several resolutions in one oracle process (its start-up costs seconds): one result per (file, args, cwd)."""
    payload = json.dumps([[str(f), [f"{k}:={v}" for k, v in a.items()], str(c)] for f, a, c in jobs])
    result = subprocess.run(
        [sys.executable, str(RESOLVER), "--batch"],
        input=payload,
        capture_output=True,
        text=True,
        env=dict(env),
        check=False,
        timeout=900,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"the resolver failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]
