"""Finding packages and their executables through the ament index, exactly where ros2 launch looks.

On a ROS 2 install a package `pkg` is registered by the marker file
`<prefix>/share/ament_index/resource_index/packages/<pkg>`, its data lives in `<prefix>/share/<pkg>`
and its executables in `<prefix>/lib/<pkg>/`. The prefixes are `AMENT_PREFIX_PATH` plus this
interpreter's `sys.prefix` (the project's setup makes the virtualenv an ament prefix).

A console script in the environment's `bin/` is not an executable of the package for ros2 launch,
so it is not one here either (before issue 16 it was, and files passed here that failed under
ros2 launch); when one exists, the error says how to install the package's `lib/<pkg>/<exec>`.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from lerobot_ros.launch.errors import ExecutableNotFoundError, PackageNotFoundError

PACKAGES_INDEX = Path("share") / "ament_index" / "resource_index" / "packages"


def ament_prefixes(environ: Mapping[str, str] | None = None) -> list[Path]:
    """`AMENT_PREFIX_PATH` in order, then `sys.prefix` if it is not already listed."""
    env = os.environ if environ is None else environ
    prefixes = [Path(p) for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if Path(sys.prefix) not in prefixes:
        prefixes.append(Path(sys.prefix))
    return prefixes


class PackageIndex:
    """Looks packages up in the ament index of `prefixes` and in the console scripts of this environment."""

    def __init__(
        self,
        prefixes: Iterable[Path] | None = None,
        console_scripts: Iterable[EntryPoint] | None = None,
        scripts_dir: Path | None = None,
    ) -> None:
        self.prefixes = list(ament_prefixes() if prefixes is None else prefixes)
        self._console_scripts = list(
            entry_points(group="console_scripts") if console_scripts is None else console_scripts
        )
        self.scripts_dir = Path(sysconfig.get_path("scripts")) if scripts_dir is None else scripts_dir

    def package_prefix(self, package: str) -> Path:
        """The install prefix whose ament index lists `package`."""
        for prefix in self.prefixes:
            if (prefix / PACKAGES_INDEX / package).is_file():
                return prefix
        raise PackageNotFoundError(
            f"package {package!r} is not in the ament index of {os.pathsep.join(str(p) for p in self.prefixes)}; "
            "install it (pip install -e / colcon build) or add its install prefix to AMENT_PREFIX_PATH"
        )

    def package_share(self, package: str) -> Path:
        """`<prefix>/share/<package>` (what `$(find-pkg-share package)` gives)."""
        return self.package_prefix(package) / "share" / package

    def _console_script(self, package: str, executable: str) -> Path | None:
        for ep in self._console_scripts:
            if ep.name == executable and ep.module.split(".")[0] == package:
                script = self.scripts_dir / executable
                if script.is_file() and os.access(script, os.X_OK):
                    return script
        return None

    def executable(self, package: str, executable: str) -> Path:
        """`<prefix>/lib/<package>/<executable>`, as launch_ros's ExecutableInPackage finds it."""
        if "/" in executable:
            raise ExecutableNotFoundError(
                f"executable {executable!r} must be a bare name (no '/') when a package is given"
            )
        prefix = self.package_prefix(package)
        candidate = prefix / "lib" / package / executable
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
        available = sorted(self.executables(package))
        script = self._console_script(package, executable)
        how = (
            f"; {script} is a console script, which ros2 launch does not look for: install the package with "
            "scripts/setup.sh or colcon build, which put it into lib/" + package
            if script is not None
            else "; check the 'exec' name or reinstall the package"
        )
        raise ExecutableNotFoundError(
            f"package {package!r} has no executable {executable!r} in {prefix / 'lib' / package}"
            + (f" (it has: {', '.join(available)})" if available else " (it has none)")
            + how
        )

    def executables(self, package: str) -> set[str]:
        """Names of the executables `package` provides in `lib/<package>/` of its prefix."""
        names: set[str] = set()
        for prefix in self.prefixes:
            lib_dir = prefix / "lib" / package
            if (prefix / PACKAGES_INDEX / package).is_file() and lib_dir.is_dir():
                names.update(p.name for p in lib_dir.iterdir() if p.is_file() and os.access(p, os.X_OK))
        return names
