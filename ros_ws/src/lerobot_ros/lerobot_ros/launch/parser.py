"""Reading ROS 2 YAML launch files into a `LaunchPlan`, the way launch / launch_ros's YAML frontend does.

Two passes, as in `launch`: every file is first checked against the tags and attributes it may hold
(`entities.py`, like each action's `parse()`), then its actions are visited in order, each by the
handler of its tag (`Planner.HANDLERS`, like each action's `execute()`), with the launch
configurations of their scope:

- `arg` sets its default only when the configuration is not already set (command line, includer);
  an included file's required arguments (no default) must be in the include's `arg:` list;
- `let`, `push-ros-namespace`, `set_parameter`, `set_remap` change the configurations of the scope;
  `set_env` / `append_env` / `unset_env` the environment of the processes after them (and `$(env)`);
- `group` with `scoped` (the default) restores configurations and environment afterwards; `include` does not;
- `timer` runs its actions `period` seconds later with the configurations of that time (the end of
  the file); `log` prints, `shutdown` stops the launch; `for` / `for_each` repeat their actions (launch 3.8);
- `if` / `unless` take `true`/`false`/`1`/`0` (any case, stripped) after substitution.

The same planner reads a file without running it (`_Survey`): every branch is visited, only the
handlers that declare arguments or hold actions act, and what cannot be evaluated is skipped. That
gives launch's static argument search (the required arguments of an include) and `--show-args`;
`arg` is the one place an argument is declared.

Relative paths (`include: file`, `param: from`) are resolved against the current directory like
`ros2 launch` does; write `$(dirname)/...` or `$(find-pkg-share pkg)/...` for paths next to a file.
A launch file's path is made absolute the way launch does it (`os.path.abspath`: `..` removed by name,
symbolic links kept), so `$(dirname)` of an installed launch file that links into a source tree is its
folder in share/, and `$(dirname)/../config` is the installed config.

A `param: from` file that is not a file is skipped with a warning (`LaunchPlan.warnings`), as launch_ros
does; with `allow_substs: true` it must exist (launch_ros reads it to substitute).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import yaml

from lerobot_ros.bounded_yaml import load_yaml
from lerobot_ros.launch import processes
from lerobot_ros.launch.description import (
    DeclaredArgument,
    LaunchPlan,
    LogMessage,
    ProcessDescription,
    ShutdownRequest,
)
from lerobot_ros.launch.entities import OTHER_FORMATS, entity_of, read_launch_file
from lerobot_ros.launch.errors import LaunchError, LaunchFileError, Location, SubstitutionError
from lerobot_ros.launch.marked_yaml import MarkedList, MarkedMap
from lerobot_ros.launch.parameters import (
    ParameterTypeError,
    global_parameter_rule,
    global_parameter_value,
)
from lerobot_ros.launch.processes import ROS_NAMESPACE, make_namespace_absolute, prefix_namespace, validate_namespace
from lerobot_ros.launch.substitutions import (
    SubstitutionContext,
    evaluate,
    parse_template,
    split_command_line,
    typed_bool,
    unescape,
)
from lerobot_ros.launch.visit import Frame, Scope

_CLI_ARGUMENT = re.compile(r"^([^\s:=]+):=(.*)$", re.DOTALL)
_MAX_INCLUDE_DEPTH = 32


def parse_cli_arguments(arguments: Sequence[str], launch_file: Path) -> dict[str, str]:
    """`name:=value` strings into a dict; a malformed one is a `LaunchFileError` naming the file."""
    result: dict[str, str] = {}
    for argument in arguments:
        match = _CLI_ARGUMENT.match(argument)
        if not match:
            raise LaunchFileError(
                Location(launch_file, 1, "launch"),
                f"command-line argument {argument!r} is not NAME:=VALUE; write it like namespace:=robot1",
            )
        result[match.group(1)] = match.group(2)
    return result


def _condition(text: str, location: Location, attribute: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise LaunchFileError(location, f"{attribute} must be true/false/1/0, got {text!r}")


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


@dataclass
class _Deferred:
    """The actions of a `timer`, run after the file with the configurations of that time."""

    delay: float
    children: MarkedList
    path: Path
    included_by: Location | None
    order: int
    cancel_on_shutdown: bool = True


@dataclass(frozen=True)
class _Survey:
    """Reading a file without running it: every branch is visited, nothing that cannot be evaluated fails.

    `defaults=True` (`--show-args`): `arg` defaults and include arguments are evaluated as far as they
    go and used by what follows; loops are looked into once. `defaults=False` is launch's
    `get_launch_arguments` (no context): no configurations and no file (`$(var)`, `$(dirname)` do not
    evaluate), only absolute include paths, not into loops. `includes=False`: the file alone.
    """

    defaults: bool
    includes: bool = True


_LAUNCH_STATIC = _Survey(defaults=False)


@dataclass(frozen=True)
class _Declaration:
    """An `arg` the planner met, with where it was met (for the required-argument check of includes)."""

    argument: DeclaredArgument
    conditional: bool
    given: tuple[tuple[str, ...], ...]


Handler = Callable[["Planner", Any, Location, Frame], None]


class Planner:
    """Visits a launch file's actions, each with the handler of its tag (`HANDLERS`).

    Running (`survey` None): conditions are evaluated and the plan (processes, configurations,
    messages, shutdown) is built. Surveying: only the `SURVEYED` handlers act, on every branch.
    Either way `declarations` lists the `arg`s met, in order.
    """

    def __init__(
        self,
        package_share: Callable[[str], Path],
        package_prefix: Callable[[str], Path],
        find_executable: Callable[[str, str], Path],
        environ: Mapping[str, str],
        cwd: Path,
        cli_arguments: Mapping[str, str],
        survey: _Survey | None = None,
    ) -> None:
        self.survey = survey
        self.package_share = package_share
        self.package_prefix = package_prefix
        self.find_executable = find_executable
        self.base_environ = dict(environ)
        self.scope = Scope(dict(cli_arguments), dict(environ), {})
        self.cwd = cwd
        self.processes: list[ProcessDescription] = []
        self.declarations: list[_Declaration] = []
        self.messages: list[LogMessage] = []
        self.warnings: list[str] = []
        self.shutdown: ShutdownRequest | None = None
        self.include_stack: list[Path] = []
        self.deferred: list[_Deferred] = []
        self._files: dict[Path, MarkedList] = {}
        self.surveyed: set[Path] = set()

    @property
    def configurations(self) -> dict[str, str]:
        return self.scope.configurations

    def context(self, frame: Frame) -> SubstitutionContext:
        return SubstitutionContext(
            self.scope.configurations,
            self.scope.environ,
            frame.path,
            self.package_share,
            self.package_prefix,
            self.find_executable,
            self.cwd,
            frame.loop_indices,
            frame.loop_values,
        )

    def sub(self, value: Any, location: Location, frame: Frame) -> str:
        try:
            return evaluate(parse_template(_scalar_text(value)), self.context(frame))
        except LaunchError as err:
            raise LaunchFileError(location, str(err)) from None

    def try_sub(self, value: Any, frame: Frame) -> str | None:
        """`value` substituted, or None where it cannot be (when surveying)."""
        try:
            template = parse_template(_scalar_text(value))
            in_file = any(not isinstance(p, str) and p.name in ("dirname", "filename") for p in template)
            if in_file and self.survey is not None and not self.survey.defaults:
                return None  # launch's search without a context has no file
            return evaluate(template, self.context(frame))
        except LaunchError:
            return None

    def split(self, value: Any, location: Location, frame: Frame) -> list[str]:
        try:
            return split_command_line(_scalar_text(value), self.context(frame))
        except LaunchError as err:
            raise LaunchFileError(location, str(err)) from None

    def typed_bool(self, value: Any, location: Location, frame: Frame, attribute: str) -> bool:
        if isinstance(value, bool):
            return value
        try:
            return typed_bool(self.sub(value, location, frame))
        except SubstitutionError as err:
            raise LaunchFileError(location, f"{attribute}: {err}") from None

    def resolve_path(self, text: str) -> Path:
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.cwd / path

    def load(self, path: Path) -> MarkedList:
        if path not in self._files:
            self._files[path] = read_launch_file(path)
        return self._files[path]

    def run_file(self, path: Path, included_by: Location | None) -> None:
        path = absolute_path(path)
        if path in self.include_stack or len(self.include_stack) >= _MAX_INCLUDE_DEPTH:
            chain = " -> ".join(str(p) for p in [*self.include_stack, path])
            assert included_by is not None
            raise LaunchFileError(included_by, f"include cycle: {chain}; remove the include that loops back")
        entities = self.load(path)
        self.include_stack.append(path)
        try:
            self.run_entities(entities, Frame(path, included_by))
        finally:
            self.include_stack.pop()

    def run_deferred(self) -> None:
        while self.deferred:
            self.deferred.sort(key=lambda d: (d.delay, d.order))
            timer = self.deferred.pop(0)
            if timer.cancel_on_shutdown and self.shutdown is not None and self.shutdown.delay <= timer.delay:
                continue  # launch cancels pending timers on shutdown
            self.run_entities(timer.children, Frame(timer.path, timer.included_by, timer.delay))

    def run_entities(self, entities: MarkedList, frame: Frame) -> None:
        for index, item in enumerate(entities):
            tag, body, line = entity_of(item, entities, index, frame.path)
            location = Location(frame.path, line, tag)
            here = frame
            if self.survey is not None:
                if tag not in self.SURVEYED:
                    continue
                if isinstance(body, MarkedMap) and ("if" in body or "unless" in body):
                    here = replace(frame, conditional=True)
            elif isinstance(body, MarkedMap) and not self.condition_holds(body, location, frame):
                continue
            self.HANDLERS[tag](self, body, location, here)

    def survey_file(self, path: Path) -> list[_Declaration]:
        """The `arg`s of `path` and of the includes the survey follows, in order; raises if `path` is unreadable."""
        self.surveyed.add(path)
        self.run_entities(self.load(path), Frame(path, None))
        return self.declarations

    def surveyor(self, survey: _Survey) -> Planner:
        """A planner that surveys files with this one's package index, environment and loaded files."""
        planner = Planner(
            self.package_share,
            self.package_prefix,
            self.find_executable,
            self.base_environ,
            self.cwd,
            {},
            survey,
        )
        planner._files = self._files
        return planner

    def condition_holds(self, body: MarkedMap, location: Location, frame: Frame) -> bool:
        if "if" in body:
            return _condition(self.sub(body["if"], location, frame), location, "'if'")
        if "unless" in body:
            return not _condition(self.sub(body["unless"], location, frame), location, "'unless'")
        return True

    def arg(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        name = unescape(body["name"])
        default = body.get("default")
        choices = tuple(unescape(c["value"]) for c in body.get("choice", ())) or None
        description = unescape(body.get("description", ""))
        argument = DeclaredArgument(name, default, description, choices, location)
        self.declarations.append(_Declaration(argument, frame.conditional, frame.given))
        if self.survey is not None:
            if self.survey.defaults and default is not None and name not in self.configurations:
                value = self.try_sub(default, frame)
                if value is not None:
                    self.configurations[name] = value
            return
        if name not in self.configurations:
            if default is None:
                how = (
                    f"add {{name: {name}, value: ...}} to the 'arg' list of the include at "
                    f"{frame.included_by.path}:{frame.included_by.line}"
                    if frame.included_by is not None
                    else f"pass {name}:=VALUE on the command line"
                )
                raise LaunchFileError(location, f"argument {name!r} is required (it has no default); {how}")
            self.configurations[name] = self.sub(default, location, frame)
        value = self.configurations[name]
        if choices is not None and value not in choices:
            raise LaunchFileError(
                location, f"argument {name!r} is {value!r}, not one of {', '.join(choices)}; pick one"
            )

    def let(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        self.configurations[self.sub(body["name"], location, frame)] = self.sub(body["value"], location, frame)

    def push_ros_namespace(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        namespace = self.sub(body["namespace"], location, frame)
        combined = make_namespace_absolute(prefix_namespace(self.configurations.get(ROS_NAMESPACE), namespace))
        self.configurations[ROS_NAMESPACE] = validate_namespace(combined or "/", location)

    def set_env(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        name, value = self.sub(body["name"], location, frame), self.sub(body["value"], location, frame)
        self.scope.environ[name] = value
        self.scope.env_changes[name] = value

    def append_env(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        name, value = self.sub(body["name"], location, frame), self.sub(body["value"], location, frame)
        prepend = self.typed_bool(body["prepend"], location, frame, "prepend") if "prepend" in body else False
        separator = self.sub(body["separator"], location, frame) if "separator" in body else os.pathsep
        current = self.scope.environ.get(name)
        if current is not None:
            value = value + separator + current if prepend else current + separator + value
        self.scope.environ[name] = value
        self.scope.env_changes[name] = value

    def unset_env(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        name = self.sub(body["name"], location, frame)
        self.scope.environ.pop(name, None)
        self.scope.env_changes[name] = None

    def set_parameter(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        name = self.sub(body["name"], location, frame)
        try:
            value = global_parameter_value(self.sub(body["value"], location, frame))
        except ParameterTypeError as err:
            raise LaunchFileError(location, f"parameter {name!r}: {err}") from None
        if self.scope.global_params is None:
            self.scope.global_params = []
        self.scope.global_params.append(global_parameter_rule(name, value))

    def set_remap(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        rule = (self.sub(body["from"], location, frame), self.sub(body["to"], location, frame))
        if self.scope.global_remaps is None:
            self.scope.global_remaps = []
        self.scope.global_remaps.append(rule)

    def log(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        self.messages.append(LogMessage(self.sub(body["message"], location, frame), location, frame.delay))

    def shutdown_action(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        reason = self.sub(body["reason"], location, frame) if body.get("reason") else "shutdown action"
        if self.shutdown is None or frame.delay < self.shutdown.delay:
            self.shutdown = ShutdownRequest(reason, location, frame.delay)

    def timer(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        if self.survey is not None:
            self.run_entities(body["children"], replace(frame, conditional=True))
            return
        period = body["period"]
        if not isinstance(period, float):
            text = self.sub(period, location, frame)
            try:
                period = float(text)
            except ValueError:
                raise LaunchFileError(location, f"period must be a number of seconds, got {text!r}") from None
        cancel = (
            self.typed_bool(body["cancel_on_shutdown"], location, frame, "cancel_on_shutdown")
            if "cancel_on_shutdown" in body
            else True
        )
        self.deferred.append(
            _Deferred(frame.delay + period, body["children"], frame.path, frame.included_by, len(self.deferred), cancel)
        )

    def for_loop(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        if self.survey is not None:
            self.survey_loop(body, frame)
            return
        text = self.sub(body["len"], location, frame)
        try:
            length = int(text)
        except ValueError:
            raise LaunchFileError(location, f"len must be an integer, got {text!r}") from None
        name = unescape(body["name"])
        for index in range(length):
            inner = replace(frame, loop_indices={**frame.loop_indices, name: index})
            self.run_entities(body["children"], inner)

    def for_each(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        if self.survey is not None:
            self.survey_loop(body, frame)
            return
        text = self.sub(body["values"], location, frame)
        for chunk in text.split(";"):
            if not chunk.strip():
                continue
            try:
                values = load_yaml(chunk)
            except yaml.YAMLError as err:
                raise LaunchFileError(
                    location, f"values: {chunk!r} is not YAML: {' '.join(str(err).split())}"
                ) from None
            if not isinstance(values, dict):
                raise LaunchFileError(
                    location,
                    f"values: each ';'-separated item must be a mapping like {{name: a, id: 1}}, got {chunk!r}",
                )
            inner = replace(
                frame, loop_values={**frame.loop_values, **{str(k): _scalar_text(v) for k, v in values.items()}}
            )
            self.run_entities(body["children"], inner)

    def survey_loop(self, body: MarkedMap, frame: Frame) -> None:
        """A loop's actions, once (launch's static search does not look into loops)."""
        assert self.survey is not None
        if self.survey.defaults:
            self.run_entities(body["children"], replace(frame, conditional=True))

    def group(self, body: MarkedMap | MarkedList, location: Location, frame: Frame) -> None:
        children = body if isinstance(body, MarkedList) else body["children"]
        scoped = True if isinstance(body, MarkedList) else bool(body.get("scoped", True))
        saved = self.scope.copy()
        try:
            self.run_entities(children, frame)
        finally:
            if scoped:
                self.scope = saved

    def include(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        if self.survey is not None:
            self.survey_include(body, location, frame)
            return
        text = self.sub(body["file"], location, frame)
        target = self.resolve_path(text)
        if target.suffix in OTHER_FORMATS:
            raise LaunchFileError(
                location,
                f"{target.name}: {OTHER_FORMATS[target.suffix]} launch files are not supported by lerobot-ros launch "
                "(only the YAML format); include a .launch.yaml file instead",
            )
        if not target.is_file():
            raise LaunchFileError(
                location,
                f"included file {target} does not exist; relative paths are taken from the current directory "
                f"as in ros2 launch, so write $(dirname)/{text} for a file next to this one",
            )
        arguments = [
            (self.sub(a["name"], location, frame), self.sub(a["value"], location, frame)) for a in body.get("arg", ())
        ]
        self.check_required_arguments(absolute_path(target), [name for name, _ in arguments], location)
        for name, value in arguments:
            self.configurations[name] = value
        self.run_file(target, location)

    def survey_include(self, body: MarkedMap, location: Location, frame: Frame) -> None:
        """Follow an include whose path evaluates now (launch: `try_get_launch_description_without_context`).

        A file is surveyed once; one that cannot be read is skipped (the run reports it).
        """
        assert self.survey is not None
        if not self.survey.includes:
            return
        text = self.try_sub(body["file"], frame)
        if text is None:
            return
        target = self.resolve_path(text) if self.survey.defaults else Path(text)
        if not target.is_absolute() or target.suffix in OTHER_FORMATS:
            return
        target = absolute_path(target)
        if target in self.surveyed:
            return
        try:
            entities = self.load(target)
        except LaunchError:
            return
        given: list[str] = []
        for argument in body.get("arg", ()):
            name = self.try_sub(argument["name"], frame)
            if name is None:
                continue
            given.append(name)
            value = self.try_sub(argument["value"], frame) if self.survey.defaults else None
            if value is not None:
                self.configurations[name] = value
        self.surveyed.add(target)
        inner = Frame(target, location, conditional=frame.conditional, given=(*frame.given, tuple(given)))
        self.run_entities(entities, inner)

    def check_required_arguments(self, target: Path, given: list[str], location: Location | None) -> None:
        """launch's IncludeLaunchDescription check: required args found statically must be passed by the include.

        `location` is the include; None for the file given to the launcher (its include is the command line).
        """
        try:
            declarations = self.surveyor(_LAUNCH_STATIC).survey_file(target)
        except LaunchError:
            return  # reported when the file runs
        seen: set[str] = set()
        for declaration in declarations:
            argument = declaration.argument
            if argument.name in seen:
                continue  # the first declaration of a name counts
            seen.add(argument.name)
            if declaration.conditional or argument.default is not None:
                continue
            names = [*given, *(n for names in declaration.given for n in names)]
            if argument.name not in names and location is None:
                raise LaunchFileError(
                    argument.location,
                    f"argument {argument.name!r} is required (it has no default); pass {argument.name}:=VALUE",
                )
            if argument.name not in names:
                assert location is not None
                raise LaunchFileError(
                    location,
                    f"the included file {target.name} requires argument {argument.name!r} "
                    f"(declared at {argument.location.path.name}:{argument.location.line}); add "
                    f"{{name: {argument.name}, value: ...}} to this include's 'arg' list "
                    "(ros2 launch does not take it from the command line)",
                )

    HANDLERS: ClassVar[dict[str, Handler]] = {
        "arg": arg,
        "let": let,
        "node": processes.node,
        "executable": processes.executable,
        "include": include,
        "group": group,
        "push-ros-namespace": push_ros_namespace,
        "push_ros_namespace": push_ros_namespace,
        "set_env": set_env,
        "append_env": append_env,
        "unset_env": unset_env,
        "set_parameter": set_parameter,
        "set_remap": set_remap,
        "log": log,
        "shutdown": shutdown_action,
        "timer": timer,
        "for": for_loop,
        "for_each": for_each,
    }
    # the handlers that act when surveying: `arg`, and those that hold actions
    SURVEYED: ClassVar[frozenset[str]] = frozenset({"arg", "group", "timer", "for", "for_each", "include"})


def absolute_path(path: Path) -> Path:
    """`path` made absolute as launch makes a launch file's path (`os.path.abspath`): symbolic links are kept."""
    return Path(os.path.abspath(path))


def plan_launch(
    launch_file: Path,
    cli_arguments: Mapping[str, str],
    *,
    package_share: Callable[[str], Path],
    package_prefix: Callable[[str], Path],
    find_executable: Callable[[str, str], Path],
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> LaunchPlan:
    """Resolve `launch_file` with `cli_arguments` into the processes to start; raises `LaunchError`.

    The file is run like `ros2 launch FILE name:=value` runs it: as an include whose `arg` list is
    the command line.
    """
    planner = Planner(
        package_share,
        package_prefix,
        find_executable,
        dict(os.environ) if environ is None else environ,
        Path.cwd() if cwd is None else cwd,
        cli_arguments,
    )
    launch_file = absolute_path(launch_file)
    planner.check_required_arguments(launch_file, list(cli_arguments), None)
    planner.run_file(launch_file, None)
    planner.run_deferred()
    declared = tuple(d.argument for d in planner.declarations)
    known = {a.name for a in declared} | {a.name for a in declared_arguments(launch_file)}
    for name in cli_arguments:
        if name not in known:
            raise LaunchFileError(
                Location(launch_file, 1, "launch"),
                f"command-line argument {name!r} is not declared by this launch file or its includes "
                f"(declared: {', '.join(sorted(known)) or 'none'}); check its spelling",
            )
    return LaunchPlan(
        launch_file=launch_file,
        processes=tuple(planner.processes),
        arguments=declared,
        configurations={k: v for k, v in planner.configurations.items()},
        messages=tuple(planner.messages),
        shutdown=planner.shutdown,
        warnings=tuple(planner.warnings),
    )


def declared_arguments(
    launch_file: Path,
    *,
    package_share: Callable[[str], Path] | None = None,
    package_prefix: Callable[[str], Path] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> list[DeclaredArgument]:
    """The `arg`s a user can pass to `launch_file`, without running it.

    Every `arg` of the file counts, whatever the conditions around it. With `package_share` given,
    included files are followed too when their path evaluates with the defaults known at that point
    (best effort, like `ros2 launch --show-args`); arguments an include sets itself are left out.
    """

    def no_package(package: str) -> Path:
        raise SubstitutionError(f"cannot look up package {package!r} here")

    def no_executable(executable: str, package: str) -> Path:
        raise SubstitutionError(f"cannot look up {executable!r} of package {package!r} here")

    planner = Planner(
        package_share or no_package,
        package_prefix or no_package,
        no_executable,
        dict(os.environ) if environ is None else environ,
        Path.cwd() if cwd is None else cwd,
        {},
        _Survey(defaults=True, includes=package_share is not None),
    )
    declarations = planner.survey_file(absolute_path(launch_file))
    return [d.argument for d in declarations if not d.given or d.argument.name not in d.given[-1]]
