"""Files a package installs into `<prefix>/share/<package>` (contracts, robot configs, launch files), found the way
`$(find-pkg-share ...)` finds them: never through the checkout a module happens to sit in.

    from lerobot_ros import share
    share.find("config/contracts/so101_sim.yaml")           # -> <prefix>/share/lerobot_ros/config/contracts/...
    share.find("launch/policy.launch.yaml", "lerobot_policy_node")

Where it looks, in order: the ament index of `AMENT_PREFIX_PATH`, then of this interpreter's prefix (what
`pip install`, `colcon build` and scripts/setup.sh register); then, for an editable install, the package's own
source folder (the one holding its package.xml). The top-level `config/` and `launch/` of the repository are
what lerobot_ros installs (its `config/contracts`, `config/robots` and `launch/*.yaml` link there).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from lerobot_ros.launch.packages import PACKAGES_INDEX, ament_prefixes

PACKAGE = "lerobot_ros"


class ShareFileNotFoundError(FileNotFoundError):
    """A package data file is in no ament prefix and no source folder (one line naming where it looked)."""


def _source_folder(package: str) -> Path | None:
    """The folder with the package's package.xml when it is imported from its source tree (editable install)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location).resolve().parent
        if (folder / "package.xml").is_file():
            return folder
    return None


def candidates(relative: str, package: str = PACKAGE, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every place `find` looks for `relative`, in order."""
    places = [
        prefix / "share" / package / relative
        for prefix in ament_prefixes(environ)
        if (prefix / PACKAGES_INDEX / package).is_file()
    ]
    source = _source_folder(package)
    if source is not None:
        places.append(source / relative)
    return places


def find(relative: str, package: str = PACKAGE, environ: Mapping[str, str] | None = None) -> Path:
    """`<share of package>/relative` (a file); ShareFileNotFoundError naming the places tried when there is none."""
    if Path(relative).is_absolute() or ".." in Path(relative).parts:
        raise ValueError(f"{relative!r}: give a path inside the package's share folder, e.g. config/contracts/x.yaml")
    places = candidates(relative, package, environ)
    for path in places:
        if path.is_file():
            return path
    prefixes = os.pathsep.join(str(p) for p in ament_prefixes(environ))
    where = ", ".join(str(p) for p in places) or f"no ament prefix lists {package} ({prefixes})"
    raise ShareFileNotFoundError(
        f"{relative} is not installed with {package} (looked in: {where}); install the package (scripts/setup.sh, "
        "pip install or colcon build) or add its install prefix to AMENT_PREFIX_PATH"
    )
