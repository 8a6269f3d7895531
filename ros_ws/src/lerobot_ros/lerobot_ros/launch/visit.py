"""What the launch file visitor (`parser.Planner`) hands the action handlers of `processes`: where it is
(`Frame`), the configurations and environment of its scope (`Scope`), and the planner's side they use (`Visitor`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lerobot_ros.launch.description import ProcessDescription
from lerobot_ros.launch.errors import Location
from lerobot_ros.launch.substitutions import SubstitutionContext


@dataclass
class Scope:
    """What a scoped `group` saves and restores: launch configurations and environment.

    `global_params` / `global_remaps` live in launch's configurations too; like there, a list that
    existed before a group is shared with it (a `set_parameter` inside the group extends it).
    """

    configurations: dict[str, str]
    environ: dict[str, str]
    env_changes: dict[str, str | None]
    global_params: list[str] | None = None
    global_remaps: list[tuple[str, str]] | None = None

    def copy(self) -> Scope:
        return Scope(
            dict(self.configurations),
            dict(self.environ),
            dict(self.env_changes),
            self.global_params,
            self.global_remaps,
        )


@dataclass
class Frame:
    """Where the visitor is: the file, its includer, the enclosing loops, the timer delay.

    When surveying: whether an `if`/`unless`/timer is around, and the argument names given by each
    include between the surveyed file and here.
    """

    path: Path
    included_by: Location | None
    delay: float = 0.0
    loop_indices: dict[str, int] = field(default_factory=dict)
    loop_values: dict[str, str] = field(default_factory=dict)
    conditional: bool = False
    given: tuple[tuple[str, ...], ...] = ()


class Visitor(Protocol):
    """The planner as the action handlers of `processes` see it (`parser.Planner` is one)."""

    scope: Scope
    processes: list[ProcessDescription]
    warnings: list[str]
    find_executable: Callable[[str, str], Path]

    @property
    def configurations(self) -> dict[str, str]: ...
    def context(self, frame: Frame) -> SubstitutionContext: ...
    def sub(self, value: Any, location: Location, frame: Frame) -> str: ...
    def split(self, value: Any, location: Location, frame: Frame) -> list[str]: ...
    def typed_bool(self, value: Any, location: Location, frame: Frame, attribute: str) -> bool: ...
    def resolve_path(self, text: str) -> Path: ...
