"""The DDS transport profile and the ROS environment every process of the stack runs with.

Fast DDS with its default transports drops most large best-effort messages (camera frames)
on small machines; `fastdds_shm.xml` gives each participant a 16 MB shared-memory segment
plus UDPv4 on the loopback interface only (nothing of the stack is reachable from the LAN).
`fastdds_multihost.xml` (LEROBOT_ROS_DDS=multihost) is for a stack split over hosts: the same
shared memory inside a host, UDPv4 with large socket buffers between hosts, and SUBNET discovery.
Processes that die leave their segments in /dev/shm: `clean_stale_shm` removes
the ones whose owner is gone, the way Fast DDS's own `fastdds shm clean` decides it (an
unlocked `_el`/`_sl` lock file means the owner is dead).
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lerobot_ros import share

PROFILE_NAME = "fastdds_shm.xml"
PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"
# LEROBOT_ROS_DDS picks one of the shipped profiles by name (LEROBOT_ROS_DDS_PROFILE overrides with a path).
PROFILE_CHOICE_ENV = "LEROBOT_ROS_DDS"
PROFILES = {"shm": PROFILE_NAME, "multihost": "fastdds_multihost.xml"}
DISCOVERY_ENV = "ROS_AUTOMATIC_DISCOVERY_RANGE"
SHM_DIR = Path("/dev/shm")

_SEGMENT_LOCK = re.compile(r"^fastdds_[0-9a-z]{16}_(el|sl)$")
_PORT_LOCK = re.compile(r"^fastdds_port\d{1,5}_(el|sl)$")


class DdsProfileError(RuntimeError):
    """The DDS transport profile cannot be found."""


def profile_choice(name: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The profile name to use: `name`, else LEROBOT_ROS_DDS, else "shm"; an unknown name is a DdsProfileError."""
    env = os.environ if environ is None else environ
    choice = name or env.get(PROFILE_CHOICE_ENV) or "shm"
    if choice not in PROFILES:
        source = "profile" if name else PROFILE_CHOICE_ENV
        raise DdsProfileError(f"{source}={choice!r} is not a DDS profile; use one of {', '.join(sorted(PROFILES))}")
    return choice


def profile_path(name: str | None = None) -> Path:
    """Path of a Fast DDS profile shipped with lerobot_ros: `name` ("shm", "multihost"), else LEROBOT_ROS_DDS,
    else the shared-memory one. LEROBOT_ROS_DDS_PROFILE (a path) overrides them all."""
    file_name = PROFILES[profile_choice(name)]
    override = os.environ.get("LEROBOT_ROS_DDS_PROFILE")
    if override:
        path = Path(override)
        if not path.is_file():
            raise DdsProfileError(
                f"LEROBOT_ROS_DDS_PROFILE={override} does not exist; unset it or point it at a Fast DDS XML profile"
            )
        return path
    try:
        return share.find(f"config/{file_name}")
    except share.ShareFileNotFoundError as err:
        raise DdsProfileError(str(err)) from None


def ros_environment(base: Mapping[str, str] | None = None, profile: str | None = None) -> dict[str, str]:
    """Environment for a ROS process of this stack: DDS profile, middleware and ament prefix.

    `profile` (or LEROBOT_ROS_DDS in `base`) picks the shipped profile: "shm" (default) or "multihost", which also
    sets ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET unless `base` sets a range. Values already set in `base` win, so a
    user can point at another profile or middleware, with one exception: under the shipped loopback-only "shm"
    profile a LOCALHOST range is passed on as SYSTEM_DEFAULT. The profile already keeps discovery and data on
    this host, while rmw_fastrtps implements LOCALHOST by adding a UDPv4 transport of its own whose sockets are
    bound to every interface.
    """
    env = dict(os.environ if base is None else base)
    choice = profile_choice(profile, env)
    if choice != "shm":
        env[PROFILE_CHOICE_ENV] = choice  # processes started with this environment pick the same profile
        env.setdefault(DISCOVERY_ENV, "SUBNET")
    if PROFILE_ENV not in env and "FASTDDS_BUILTIN_TRANSPORTS" not in env:
        env[PROFILE_ENV] = str(profile_path(choice))
    if env.get(DISCOVERY_ENV) == "LOCALHOST" and _is_shipped_loopback_profile(env.get(PROFILE_ENV)):
        env[DISCOVERY_ENV] = "SYSTEM_DEFAULT"
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    prefixes = [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if sys.prefix not in prefixes:
        prefixes.append(sys.prefix)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(prefixes)
    return env


def _is_shipped_loopback_profile(path: str | None) -> bool:
    if path is None:
        return False
    try:
        return Path(path).resolve() == share.find(f"config/{PROFILE_NAME}").resolve()
    except share.ShareFileNotFoundError:
        return False


def apply_ros_environment() -> None:
    """Apply `ros_environment()` to this process; call before rclpy.init()."""
    os.environ.update(ros_environment())


@dataclass(frozen=True)
class ShmCleanReport:
    removed: tuple[str, ...]
    in_use: int


def _owner_alive(lock_file: Path) -> bool:
    """A live owner holds a lock on the `_el`/`_sl` file; probing it must not block."""
    try:
        with open(lock_file, "ab") as fd:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:
        return True  # cannot tell: leave it alone
    return False


def clean_stale_shm(shm_dir: Path = SHM_DIR) -> ShmCleanReport:
    """Remove Fast DDS shared-memory segments and ports whose owning process is gone."""
    try:
        names = sorted(os.listdir(shm_dir))
    except FileNotFoundError:
        return ShmCleanReport(removed=(), in_use=0)
    removed: list[str] = []
    in_use = 0
    for name in names:
        is_port = bool(_PORT_LOCK.match(name))
        if not is_port and not _SEGMENT_LOCK.match(name):
            continue
        lock_file = shm_dir / name
        if not lock_file.exists():
            continue  # removed together with its sibling lock file
        if _owner_alive(lock_file):
            in_use += 1
            continue
        base = name[:-3]
        victims = [name, base]
        if is_port:
            victims.append(f"sem.{base}_mutex")
        for victim in victims:
            try:
                (shm_dir / victim).unlink()
                removed.append(victim)
            except FileNotFoundError:
                pass
    return ShmCleanReport(removed=tuple(removed), in_use=in_use)
