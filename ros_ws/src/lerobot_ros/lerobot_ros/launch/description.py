"""What a launch file resolves to: plain values, no substitutions left, ready to print or run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union

from lerobot_ros.launch.errors import Location

ParameterScalar = bool | int | float | str
# A recursive alias needs the string forward reference, which `X | Y` cannot take at runtime.
ParameterValue = Union[ParameterScalar, list[ParameterScalar], "ParameterTree"]
ParameterTree = dict[str, ParameterValue]
# launch's output destinations: screen (both streams on screen), log (stderr on screen), both / full (both
# streams on screen), own_log (nothing on screen); every line also goes to the process's own log file here.
Output = Literal["screen", "log", "both", "own_log", "full"]
OUTPUTS: tuple[Output, ...] = ("screen", "log", "both", "own_log", "full")
ALL_NODES_KEY = "/**"


@dataclass(frozen=True)
class DeclaredArgument:
    """An `arg` of a launch file."""

    name: str
    default: str | None
    description: str
    choices: tuple[str, ...] | None
    location: Location


@dataclass(frozen=True)
class InlineParameters:
    """Parameters written in the launch file; passed to the node as a generated params file."""

    values: ParameterTree

    def params_file_content(self, node_key: str) -> dict[str, dict[str, ParameterTree]]:
        """The content of the params file for these values: `{node_key: {ros__parameters: values}}`."""
        return {node_key: {"ros__parameters": self.values}}


@dataclass(frozen=True)
class ParameterFile:
    """A user-provided params file (`param: [{from: FILE}]`), passed as given.

    With `allow_substs: true` the file's text is substituted first (`substituted` holds the result),
    and that text is what the node gets, from a file written next to the generated ones.
    """

    path: Path
    substituted: str | None = None


@dataclass(frozen=True)
class NodeDetails:
    """The ROS-specific part of a `node`: what becomes `--ros-args ...`."""

    package: str
    executable: str
    name: str | None
    namespace: str | None
    parameters: tuple[InlineParameters | ParameterFile, ...] = ()
    remappings: tuple[tuple[str, str], ...] = ()
    global_parameters: tuple[str, ...] = ()  # `-p NAME:=VALUE` rules from set_parameter, before the params files

    @property
    def params_key(self) -> str:
        """The node key of generated params files: the full node name when known, else `/**` (as launch_ros)."""
        if self.name is None or self.namespace is None:
            return ALL_NODES_KEY
        return f"{self.namespace.rstrip('/')}/{self.name}"

    @property
    def fully_qualified_name(self) -> str | None:
        if self.name is None:
            return None
        return f"{(self.namespace or '/').rstrip('/')}/{self.name}"


@dataclass(frozen=True)
class ProcessDescription:
    """One process to run: a `node` (with `node` details) or an `executable`."""

    label: str
    command: tuple[str, ...]
    location: Location
    node: NodeDetails | None = None
    additional_env: Mapping[str, str] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()
    cwd: Path | None = None
    output: Output = "log"
    respawn: bool = False
    respawn_delay: float = 0.0
    respawn_max_retries: int = -1
    required: bool = False
    sigterm_timeout: float | None = None
    sigkill_timeout: float | None = None
    emulate_tty: bool = False
    start_delay: float = 0.0  # seconds after the launch starts (inside a `timer`)

    def inline_params_files(self, params_dir: Path) -> list[tuple[Path, InlineParameters | ParameterFile]]:
        """Where each generated params file (inline values, substituted `from` files) is written before the start."""
        if self.node is None:
            return []
        blocks = [p for p in self.node.parameters if isinstance(p, InlineParameters) or p.substituted is not None]
        return [(params_dir / f"{self.label}.params-{i}.yaml", block) for i, block in enumerate(blocks)]

    def argv(self, params_dir: Path) -> list[str]:
        """The full command line; inline parameters are read from files under `params_dir`."""
        argv = list(self.command)
        if self.node is None:
            return argv
        node = self.node
        argv.append("--ros-args")
        if node.name is not None:
            argv += ["-r", f"__node:={node.name}"]
        if node.namespace is not None:
            argv += ["-r", f"__ns:={node.namespace}"]
        for rule in node.global_parameters:
            argv += ["-p", rule]
        generated = iter(path for path, _ in self.inline_params_files(params_dir))
        for source in node.parameters:
            given = isinstance(source, ParameterFile) and source.substituted is None
            path = source.path if isinstance(source, ParameterFile) and given else next(generated)
            argv += ["--params-file", str(path)]
        for source_name, target in node.remappings:
            argv += ["-r", f"{source_name}:={target}"]
        return argv


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a launch file and its includes resolved to, in start order."""

    launch_file: Path
    processes: tuple[ProcessDescription, ...]
    arguments: tuple[DeclaredArgument, ...]
    configurations: Mapping[str, str]
    messages: tuple[LogMessage, ...] = ()
    shutdown: ShutdownRequest | None = None
    warnings: tuple[str, ...] = ()  # what ros2 launch also only warns about (a params file that is not a file)


@dataclass(frozen=True)
class LogMessage:
    """A `log` action: printed by the launcher `delay` seconds after the start."""

    text: str
    location: Location
    delay: float = 0.0


@dataclass(frozen=True)
class ShutdownRequest:
    """A `shutdown` action: everything stops `delay` seconds after the start (the earliest one counts)."""

    reason: str
    location: Location
    delay: float = 0.0
