"""Reading ROS 2 YAML launch files into a `LaunchPlan`.

Two passes, as in `launch`: every file is first checked against the tags and attributes this runner
knows (so a typo in a branch that is never taken still fails), then its actions are visited in
order with the launch configurations of their scope, the way `ros2 launch` executes them:

- `arg` sets its default only when the configuration is not already set (command line, includer);
- `let` sets a configuration; `push-ros-namespace` prefixes the `ros_namespace` configuration;
- `set_env` / `unset_env` change the environment of the processes after them (and of `$(env)`);
- `group` with `scoped` (the default) restores configurations and environment afterwards; `include` does not
  (what an included file sets stays visible, as in launch);
- `if` / `unless` take `true`/`false`/`1`/`0` after substitution.

Relative paths (`include: file`, `param: from`) are resolved against the current directory like
`ros2 launch` does; write `$(dirname)/...` or `$(find-pkg-share pkg)/...` for paths next to a file.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from lerobot_ros.launch.description import (
    OUTPUTS,
    DeclaredArgument,
    InlineParameters,
    LaunchPlan,
    NodeDetails,
    ParameterFile,
    ParameterScalar,
    ParameterTree,
    ParameterValue,
    ProcessDescription,
)
from lerobot_ros.launch.errors import LaunchError, LaunchFileError, Location, SubstitutionError
from lerobot_ros.launch.marked_yaml import MarkedList, MarkedMap, YamlSyntaxError, load_marked_yaml
from lerobot_ros.launch.substitutions import SubstitutionContext, split_command_line, substitute

ROS_NAMESPACE = "ros_namespace"
_NAME_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CLI_ARGUMENT = re.compile(r"^([^\s:=]+):=(.*)$", re.DOTALL)
_MAX_INCLUDE_DEPTH = 32
_CONDITIONS = frozenset({"if", "unless"})
_PROCESS_COMMON = frozenset(
    {
        "name",
        "args",
        "env",
        "cwd",
        "output",
        "respawn",
        "respawn_delay",
        "respawn_max_retries",
        "on_exit",
        "sigterm_timeout",
        "sigkill_timeout",
        "launch-prefix",
    }
)


@dataclass(frozen=True)
class _Schema:
    attributes: frozenset[str]
    required: frozenset[str] = frozenset()
    lists: frozenset[str] = frozenset()  # attributes holding a list of sub-entities
    lists_of_values: frozenset[str] = frozenset()  # attributes that may hold a scalar or a list of scalars


_ACTIONS: dict[str, _Schema] = {
    "arg": _Schema(frozenset({"name", "default", "description", "choice"}), frozenset({"name"}), frozenset({"choice"})),
    "let": _Schema(frozenset({"name", "value"}), frozenset({"name", "value"})),
    "node": _Schema(
        _PROCESS_COMMON | {"pkg", "exec", "exec_name", "namespace", "param", "remap", "ros_args"},
        frozenset({"exec"}),
        frozenset({"param", "remap", "env"}),
    ),
    "executable": _Schema(_PROCESS_COMMON | {"cmd"}, frozenset({"cmd"}), frozenset({"env"})),
    "include": _Schema(frozenset({"file", "arg"}), frozenset({"file"}), frozenset({"arg"})),
    "group": _Schema(frozenset({"scoped", "children"}), frozenset({"children"}), frozenset({"children"})),
    "push-ros-namespace": _Schema(frozenset({"namespace"}), frozenset({"namespace"})),
    "push_ros_namespace": _Schema(frozenset({"namespace"}), frozenset({"namespace"})),
    "set_env": _Schema(frozenset({"name", "value"}), frozenset({"name", "value"})),
    "unset_env": _Schema(frozenset({"name"}), frozenset({"name"})),
}
_SUB_ENTITIES: dict[tuple[str, str], _Schema] = {
    ("node", "remap"): _Schema(frozenset({"from", "to"}), frozenset({"from", "to"})),
    ("node", "env"): _Schema(frozenset({"name", "value"}), frozenset({"name", "value"})),
    ("executable", "env"): _Schema(frozenset({"name", "value"}), frozenset({"name", "value"})),
    ("include", "arg"): _Schema(frozenset({"name", "value"}), frozenset({"name", "value"})),
    ("arg", "choice"): _Schema(frozenset({"value"}), frozenset({"value"})),
    ("node", "param"): _Schema(
        frozenset({"name", "value", "type", "param", "from"}),
        lists=frozenset({"param"}),
        lists_of_values=frozenset({"value"}),
    ),
}
_PARAM_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}
_HINTS = {"ros_namespace": "use 'namespace' (launch_ros's node has no 'ros_namespace' attribute)"}


def _entity_of(item: Any, container: MarkedList, index: int, path: Path) -> tuple[str, Any, int]:
    line = container.item_lines[index]
    if not isinstance(item, MarkedMap) or len(item) != 1:
        raise LaunchFileError(
            Location(path, line, "launch"),
            "each list item must be a mapping with exactly one tag, like '- node: {...}'; fix the indentation",
        )
    ((tag, body),) = item.items()
    return str(tag), body, line


def _check_scalar(value: Any, location: Location, attribute: str) -> None:
    if isinstance(value, (MarkedMap, MarkedList)):
        raise LaunchFileError(location, f"attribute {attribute!r} must be a single value, not a list or mapping")


def _check_attributes(body: MarkedMap, schema: _Schema, location: Location, path: Path) -> None:
    allowed = schema.attributes | _CONDITIONS if location.tag in _ACTIONS else schema.attributes
    for key in body:
        if key not in allowed:
            hint = _HINTS.get(str(key), "remove it or fix its spelling")
            raise LaunchFileError(
                Location(path, body.line_of(key), location.tag),
                f"unknown attribute {key!r} (allowed: {', '.join(sorted(allowed))}); {hint}",
            )
    missing = sorted(schema.required - set(body))
    if missing:
        raise LaunchFileError(location, f"missing required attribute {missing[0]!r}; add '{missing[0]}: ...'")
    for key, value in body.items():
        if key in schema.lists:
            if not isinstance(value, MarkedList) or not all(isinstance(v, MarkedMap) for v in value):
                raise LaunchFileError(
                    Location(path, body.line_of(key), location.tag),
                    f"attribute {key!r} must be a list of mappings, like '{key}: [{{...}}, {{...}}]'",
                )
        elif key in schema.lists_of_values and isinstance(value, MarkedList):
            for item in value:
                _check_scalar(item, Location(path, body.line_of(key), location.tag), str(key))
        else:
            _check_scalar(value, Location(path, body.line_of(key), location.tag), str(key))


def check_entities(entities: Any, path: Path, where: Location) -> None:
    """Check tags, attributes and sub-entities of a list of actions; raises `LaunchFileError`."""
    if not isinstance(entities, MarkedList):
        raise LaunchFileError(where, "expected a list of actions ('- node: ...', '- arg: ...')")
    for index, item in enumerate(entities):
        tag, body, line = _entity_of(item, entities, index, path)
        location = Location(path, line, tag)
        if tag not in _ACTIONS:
            raise LaunchFileError(
                location,
                f"unknown tag {tag!r}; lerobot-ros launch supports {', '.join(sorted(_ACTIONS))}",
            )
        if tag == "group" and isinstance(body, MarkedList):
            check_entities(body, path, location)
            continue
        if not isinstance(body, MarkedMap):
            raise LaunchFileError(location, f"'{tag}' must be a mapping of attributes, like '{tag}: {{name: ...}}'")
        _check_attributes(body, _ACTIONS[tag], location, path)
        if tag == "group":
            check_entities(body["children"], path, location)
        for list_name in _ACTIONS[tag].lists & set(body):
            if tag == "group":
                continue
            sub_schema = _SUB_ENTITIES[(tag, list_name)]
            for sub_index, sub_body in enumerate(body[list_name]):
                sub_location = Location(path, body[list_name].item_lines[sub_index], f"{tag} {list_name}")
                if list_name == "param":
                    _check_param(sub_body, sub_location, path)
                else:
                    _check_attributes(sub_body, sub_schema, sub_location, path)


def _check_param(body: MarkedMap, location: Location, path: Path, nested: bool = False) -> None:
    _check_attributes(body, _SUB_ENTITIES[("node", "param")], location, path)
    if "from" in body:
        if nested:
            raise LaunchFileError(location, "'from' is not allowed in a nested param; move it to the node's param list")
        extra = set(body) - {"from"}
        if extra:
            raise LaunchFileError(location, f"'from' excludes {', '.join(sorted(extra))}; give a params file or a name")
        return
    if "name" not in body:
        raise LaunchFileError(
            location, "a param needs 'name' (with 'value' or nested 'param') or 'from' (a params file)"
        )
    if ("value" in body) == ("param" in body):
        raise LaunchFileError(location, f"param {body['name']!r} needs exactly one of 'value' or nested 'param'")
    if "param" in body:
        if "type" in body:
            raise LaunchFileError(location, "'type' cannot be combined with nested 'param'")
        for index, sub_body in enumerate(body["param"]):
            _check_param(sub_body, Location(path, body["param"].item_lines[index], location.tag), path, nested=True)


def read_launch_file(path: Path) -> MarkedList:
    """Load and structurally check one launch file; returns its list of actions."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise LaunchError(f"{path}: no such launch file; check the path") from None
    except OSError as err:
        raise LaunchError(f"{path}: cannot read: {err.strerror}") from None
    try:
        document = load_marked_yaml(text, path)
    except YamlSyntaxError as err:
        raise LaunchFileError(Location(path, err.line, "YAML"), f"{err.problem}; fix the syntax") from None
    if not isinstance(document, MarkedMap) or set(document) != {"launch"}:
        line = document.line if isinstance(document, (MarkedMap, MarkedList)) else 1
        raise LaunchFileError(
            Location(path, line, "launch"),
            "a YAML launch file is a mapping with the single key 'launch:' holding a list",
        )
    entities = document["launch"]
    if entities is None:
        entities = MarkedList(document.line)
    check_entities(entities, path, Location(path, document.line_of("launch"), "launch"))
    return cast(MarkedList, entities)


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


def _parse_bool(text: str, location: Location, attribute: str) -> bool:
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


def prefix_namespace(base: str | None, namespace: str | None) -> str | None:
    """`namespace` under `base` (launch_ros semantics): absolute namespaces replace the base."""
    if namespace is None or namespace == "":
        return base
    if base is None or namespace.startswith("/"):
        return namespace
    return f"{base.rstrip('/')}/{namespace}"


def make_namespace_absolute(namespace: str | None) -> str | None:
    if namespace is None:
        return None
    return namespace if namespace.startswith("/") else "/" + namespace


def _validate_namespace(namespace: str, location: Location) -> str:
    tokens = [t for t in namespace.split("/") if t]
    if namespace != "/" and (namespace.endswith("/") or "//" in namespace or not tokens):
        namespace = "/" + "/".join(tokens)
    for token in tokens:
        if not _NAME_TOKEN.match(token):
            raise LaunchFileError(
                location,
                f"invalid namespace {namespace!r}: {token!r} must be letters, digits and '_', "
                "not starting with a digit",
            )
    return namespace


def _typed_parameter(value: Any, type_name: str | None, location: Location, name: str) -> ParameterScalar:
    if type_name is None:
        if isinstance(value, str):
            # launch_ros reads substituted text as YAML: "5" -> 5, "true" -> True, "hi" stays "hi".
            try:
                loaded = yaml.safe_load(value)
            except yaml.YAMLError:
                return value
            return loaded if isinstance(loaded, (bool, int, float, str)) else value
        return cast(ParameterScalar, value)
    target = _PARAM_TYPES[type_name]
    text = _scalar_text(value)
    try:
        if target is bool:
            return _parse_bool(text, location, f"param {name!r}")
        return cast(ParameterScalar, target(text))
    except ValueError:
        raise LaunchFileError(
            location, f"param {name!r}: {text!r} is not a {type_name}; fix the value or its type"
        ) from None


class _Planner:
    def __init__(
        self,
        package_share: Callable[[str], Path],
        package_prefix: Callable[[str], Path],
        find_executable: Callable[[str, str], Path],
        environ: Mapping[str, str],
        cwd: Path,
        cli_arguments: Mapping[str, str],
    ) -> None:
        self.package_share = package_share
        self.package_prefix = package_prefix
        self.find_executable = find_executable
        self.environ = dict(environ)
        self.env_changes: dict[str, str | None] = {}  # set_env / unset_env in effect (None: unset)
        self.cwd = cwd
        self.configurations: dict[str, str] = dict(cli_arguments)
        self.processes: list[ProcessDescription] = []
        self.declared: list[DeclaredArgument] = []
        self.include_stack: list[Path] = []
        self._files: dict[Path, MarkedList] = {}

    def context(self, path: Path) -> SubstitutionContext:
        return SubstitutionContext(self.configurations, self.environ, path, self.package_share, self.package_prefix)

    def sub(self, value: Any, location: Location, path: Path) -> str:
        try:
            return substitute(_scalar_text(value), self.context(path))
        except LaunchError as err:
            raise LaunchFileError(location, str(err)) from None

    def split(self, value: Any, location: Location, path: Path) -> list[str]:
        try:
            return split_command_line(_scalar_text(value), self.context(path))
        except LaunchError as err:
            raise LaunchFileError(location, str(err)) from None

    def resolve_path(self, text: str) -> Path:
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.cwd / path

    def run_file(self, path: Path, included_by: Location | None) -> None:
        path = path.resolve()
        if path in self.include_stack or len(self.include_stack) >= _MAX_INCLUDE_DEPTH:
            chain = " -> ".join(str(p) for p in [*self.include_stack, path])
            assert included_by is not None
            raise LaunchFileError(included_by, f"include cycle: {chain}; remove the include that loops back")
        if path not in self._files:
            self._files[path] = read_launch_file(path)
        self.include_stack.append(path)
        try:
            self.run_entities(self._files[path], path, included_by)
        finally:
            self.include_stack.pop()

    def run_entities(self, entities: MarkedList, path: Path, included_by: Location | None) -> None:
        for index, item in enumerate(entities):
            tag, body, line = _entity_of(item, entities, index, path)
            location = Location(path, line, tag)
            if isinstance(body, MarkedMap) and not self.condition_holds(body, location, path):
                continue
            if tag == "arg":
                self.declare(body, location, path, included_by)
            elif tag == "let":
                self.configurations[self.sub(body["name"], location, path)] = self.sub(body["value"], location, path)
            elif tag in ("push-ros-namespace", "push_ros_namespace"):
                namespace = self.sub(body["namespace"], location, path)
                combined = make_namespace_absolute(prefix_namespace(self.configurations.get(ROS_NAMESPACE), namespace))
                self.configurations[ROS_NAMESPACE] = _validate_namespace(combined or "/", location)
            elif tag == "set_env":
                name, value = self.sub(body["name"], location, path), self.sub(body["value"], location, path)
                self.environ[name] = value
                self.env_changes[name] = value
            elif tag == "unset_env":
                name = self.sub(body["name"], location, path)
                self.environ.pop(name, None)
                self.env_changes[name] = None
            elif tag == "group":
                self.group(body, location, path, included_by)
            elif tag == "include":
                self.include(body, location, path)
            elif tag == "node":
                self.processes.append(self.node(body, location, path))
            elif tag == "executable":
                self.processes.append(self.executable(body, location, path))

    def condition_holds(self, body: MarkedMap, location: Location, path: Path) -> bool:
        if "if" in body and "unless" in body:
            raise LaunchFileError(location, "'if' and 'unless' cannot both be given; keep one")
        if "if" in body:
            return _parse_bool(self.sub(body["if"], location, path), location, "'if'")
        if "unless" in body:
            return not _parse_bool(self.sub(body["unless"], location, path), location, "'unless'")
        return True

    def declare(self, body: MarkedMap, location: Location, path: Path, included_by: Location | None) -> None:
        name = self.sub(body["name"], location, path)
        default = None if "default" not in body else _scalar_text(body["default"])
        choices = tuple(_scalar_text(c["value"]) for c in body.get("choice", ())) or None
        self.declared.append(
            DeclaredArgument(name, default, _scalar_text(body.get("description", "")), choices, location)
        )
        if name not in self.configurations:
            if default is None:
                how = (
                    f"add {{name: {name}, value: ...}} to the 'arg' list of the include at "
                    f"{included_by.path}:{included_by.line}"
                    if included_by is not None
                    else f"pass {name}:=VALUE on the command line"
                )
                raise LaunchFileError(location, f"argument {name!r} is required (it has no default); {how}")
            self.configurations[name] = self.sub(default, location, path)
        value = self.configurations[name]
        if choices is not None and value not in choices:
            raise LaunchFileError(
                location, f"argument {name!r} is {value!r}, not one of {', '.join(choices)}; pick one"
            )

    def group(self, body: MarkedMap | MarkedList, location: Location, path: Path, included_by: Location | None) -> None:
        children = body if isinstance(body, MarkedList) else body["children"]
        scoped = (
            True
            if isinstance(body, MarkedList) or "scoped" not in body
            else _parse_bool(self.sub(body["scoped"], location, path), location, "'scoped'")
        )
        saved = dict(self.configurations)
        saved_environ, saved_changes = dict(self.environ), dict(self.env_changes)
        try:
            self.run_entities(children, path, included_by)
        finally:
            if scoped:
                self.configurations.clear()
                self.configurations.update(saved)
                self.environ, self.env_changes = saved_environ, saved_changes

    def include(self, body: MarkedMap, location: Location, path: Path) -> None:
        text = self.sub(body["file"], location, path)
        target = self.resolve_path(text)
        if not target.is_file():
            raise LaunchFileError(
                location,
                f"included file {target} does not exist; relative paths are taken from the current directory "
                f"as in ros2 launch, so write $(dirname)/{text} for a file next to this one",
            )
        arguments = [
            (self.sub(a["name"], location, path), self.sub(a["value"], location, path)) for a in body.get("arg", ())
        ]
        for name, value in arguments:
            self.configurations[name] = value
        self.run_file(target, location)

    def process_common(self, body: MarkedMap, location: Location, path: Path) -> dict[str, Any]:
        common: dict[str, Any] = {}
        env = {self.sub(e["name"], location, path): self.sub(e["value"], location, path) for e in body.get("env", ())}
        common["additional_env"] = {**{k: v for k, v in self.env_changes.items() if v is not None}, **env}
        common["unset_env"] = tuple(sorted(k for k, v in self.env_changes.items() if v is None and k not in env))
        if "cwd" in body:
            common["cwd"] = self.resolve_path(self.sub(body["cwd"], location, path))
        if "output" in body:
            output = self.sub(body["output"], location, path)
            if output not in OUTPUTS:
                raise LaunchFileError(location, f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
            common["output"] = output
        if "respawn" in body:
            common["respawn"] = _parse_bool(self.sub(body["respawn"], location, path), location, "respawn")
        for attribute in ("respawn_delay", "sigterm_timeout", "sigkill_timeout"):
            if attribute in body:
                text = self.sub(body[attribute], location, path)
                try:
                    seconds = float(text)
                except ValueError:
                    seconds = -1.0
                if seconds < 0:
                    raise LaunchFileError(location, f"{attribute} must be a number of seconds >= 0, got {text!r}")
                common[attribute] = seconds
        if "respawn_max_retries" in body:
            text = self.sub(body["respawn_max_retries"], location, path)
            try:
                common["respawn_max_retries"] = int(text)
            except ValueError:
                raise LaunchFileError(location, f"respawn_max_retries must be an integer, got {text!r}") from None
        if "on_exit" in body:
            on_exit = self.sub(body["on_exit"], location, path)
            if on_exit != "shutdown":
                raise LaunchFileError(location, f"on_exit supports only 'shutdown', got {on_exit!r}")
            common["required"] = True
        return common

    def label(self, base: str) -> str:
        return f"{base}-{len(self.processes) + 1}"

    def command_path(self, program: str, location: Location) -> str:
        if "/" in program:
            resolved = self.resolve_path(program)
            if not (resolved.is_file() and os.access(resolved, os.X_OK)):
                raise LaunchFileError(location, f"{resolved} is not an executable file; check the path")
            return str(resolved)
        found = shutil.which(program, path=self.environ.get("PATH", os.defpath))
        if found is None:
            raise LaunchFileError(location, f"command {program!r} is not on PATH; install it or give its full path")
        return found

    def executable(self, body: MarkedMap, location: Location, path: Path) -> ProcessDescription:
        common = self.process_common(body, location, path)
        command = self.split(body["cmd"], location, path)
        if not command:
            raise LaunchFileError(location, "cmd is empty; give the program to run")
        if "args" in body:
            command += self.split(body["args"], location, path)
        command[0] = self.command_path(command[0], location)
        prefix = self.split(body["launch-prefix"], location, path) if "launch-prefix" in body else []
        base = self.sub(body["name"], location, path) if "name" in body else Path(command[0]).name
        return ProcessDescription(label=self.label(base), command=tuple(prefix + command), location=location, **common)

    def node(self, body: MarkedMap, location: Location, path: Path) -> ProcessDescription:
        common = self.process_common(body, location, path)
        executable = self.sub(body["exec"], location, path)
        package = self.sub(body["pkg"], location, path) if "pkg" in body else None
        if package is not None:
            try:
                program = str(self.find_executable(package, executable))
            except LaunchError as err:
                raise LaunchFileError(location, str(err)) from None
        else:
            program = self.command_path(executable, location)
        name = self.sub(body["name"], location, path) if "name" in body else None
        if name is not None and not _NAME_TOKEN.match(name):
            raise LaunchFileError(
                location, f"invalid node name {name!r}: use letters, digits and '_', not starting with a digit"
            )
        namespace_attr = self.sub(body["namespace"], location, path) if "namespace" in body else None
        namespace = make_namespace_absolute(prefix_namespace(self.configurations.get(ROS_NAMESPACE), namespace_attr))
        if namespace is not None:
            namespace = _validate_namespace(namespace, location)
        arguments = self.split(body["args"], location, path) if "args" in body else []
        if "ros_args" in body:
            arguments += ["--ros-args", *self.split(body["ros_args"], location, path)]
        prefix = self.split(body["launch-prefix"], location, path) if "launch-prefix" in body else []
        details = NodeDetails(
            package=package or "",
            executable=executable,
            name=name,
            namespace=namespace,
            parameters=self.parameters(body.get("param", ()), body, location, path),
            remappings=tuple(
                (self.sub(r["from"], location, path), self.sub(r["to"], location, path)) for r in body.get("remap", ())
            ),
        )
        base = self.sub(body["exec_name"], location, path) if "exec_name" in body else Path(executable).name
        return ProcessDescription(
            label=self.label(base),
            command=tuple([*prefix, program, *arguments]),
            location=location,
            node=details,
            **common,
        )

    def parameters(
        self, entries: Sequence[MarkedMap], body: MarkedMap, location: Location, path: Path
    ) -> tuple[InlineParameters | ParameterFile, ...]:
        sources: list[InlineParameters | ParameterFile] = []
        pending: ParameterTree = {}
        param_list = body.get("param")
        for index, entry in enumerate(entries):
            entry_location = Location(path, param_list.item_lines[index], "node param") if param_list else location
            if "from" in entry:
                if pending:
                    sources.append(InlineParameters(pending))
                    pending = {}
                sources.append(self.parameter_file(entry, entry_location, path))
            else:
                _merge(pending, self.parameter_tree([entry], entry_location, path))
        if pending:
            sources.append(InlineParameters(pending))
        return tuple(sources)

    def parameter_tree(self, entries: Sequence[MarkedMap], location: Location, path: Path) -> ParameterTree:
        tree: ParameterTree = {}
        for entry in entries:
            name = self.sub(entry["name"], location, path)
            if "param" in entry:
                nested = self.parameter_tree(entry["param"], location, path)
                existing = tree.get(name)
                if isinstance(existing, dict):
                    _merge(existing, nested)
                else:
                    tree[name] = nested
                continue
            type_name = self.parameter_type(entry, location, path)
            raw = entry["value"]
            value: ParameterValue
            if isinstance(raw, MarkedList):
                element_type = type_name[5:-1] if type_name else None
                value = [self.parameter_scalar(v, element_type, location, path, name) for v in raw]
            else:
                if type_name is not None and type_name.startswith("list["):
                    raise LaunchFileError(location, f"param {name!r} has type {type_name} but its value is not a list")
                value = self.parameter_scalar(raw, type_name, location, path, name)
            tree[name] = value
        return tree

    def parameter_type(self, entry: MarkedMap, location: Location, path: Path) -> str | None:
        if "type" not in entry:
            return None
        type_name = self.sub(entry["type"], location, path)
        scalar = type_name[5:-1] if type_name.startswith("list[") and type_name.endswith("]") else type_name
        if scalar not in _PARAM_TYPES:
            known = ", ".join([*_PARAM_TYPES, *(f"list[{t}]" for t in _PARAM_TYPES)])
            raise LaunchFileError(location, f"unknown param type {type_name!r}; use one of {known}")
        return type_name

    def parameter_scalar(
        self, raw: Any, type_name: str | None, location: Location, path: Path, name: str
    ) -> ParameterScalar:
        if isinstance(raw, MarkedMap):
            raise LaunchFileError(location, f"param {name!r}: a value cannot be a mapping; use nested 'param' entries")
        if raw is None:
            raise LaunchFileError(
                location, f"param {name!r} has an empty value; give one (quote '' for an empty string)"
            )
        value = self.sub(raw, location, path) if isinstance(raw, str) else raw
        return _typed_parameter(value, type_name, location, name)

    def parameter_file(self, entry: MarkedMap, location: Location, path: Path) -> ParameterFile:
        file_path = self.resolve_path(self.sub(entry["from"], location, path))
        try:
            content = yaml.safe_load(file_path.read_text())
        except FileNotFoundError:
            raise LaunchFileError(
                location, f"params file {file_path} does not exist; fix the path (try $(find-pkg-share PKG)/config/...)"
            ) from None
        except (OSError, yaml.YAMLError) as err:
            raise LaunchFileError(
                location, f"params file {file_path} cannot be read: {' '.join(str(err).split())}"
            ) from None
        if not _is_params_file(content):
            raise LaunchFileError(
                location,
                f"{file_path} is not a ROS 2 params file: put the parameters under "
                "'/**: {ros__parameters: {...}}' or 'NODE_NAME: {ros__parameters: {...}}'",
            )
        return ParameterFile(file_path)


def _merge(target: ParameterTree, source: ParameterTree) -> None:
    for key, value in source.items():
        existing = target.get(key)
        if isinstance(existing, dict) and isinstance(value, dict):
            _merge(existing, value)
        else:
            target[key] = value


def _is_params_file(content: Any) -> bool:
    """Every top-level entry leads (through namespace keys) to a `ros__parameters` mapping."""
    if not isinstance(content, dict) or not content:
        return False

    def holds_parameters(node: Any) -> bool:
        if not isinstance(node, dict) or not node:
            return False
        if "ros__parameters" in node:
            return isinstance(node["ros__parameters"], dict)
        return all(holds_parameters(v) for v in node.values())

    return all(holds_parameters(v) for v in content.values())


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
    """Resolve `launch_file` with `cli_arguments` into the processes to start; raises `LaunchError`."""
    planner = _Planner(
        package_share,
        package_prefix,
        find_executable,
        dict(os.environ) if environ is None else environ,
        Path.cwd() if cwd is None else cwd,
        cli_arguments,
    )
    launch_file = launch_file.resolve()
    planner.run_file(launch_file, None)
    known = {a.name for a in planner.declared} | {a.name for a in declared_arguments(launch_file)}
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
        arguments=tuple(planner.declared),
        configurations=dict(planner.configurations),
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
    result: list[DeclaredArgument] = []
    visited: set[Path] = set()
    env = dict(os.environ) if environ is None else environ
    base = Path.cwd() if cwd is None else cwd

    def no_package(package: str) -> Path:
        raise SubstitutionError(f"cannot look up package {package!r} here")

    def evaluate(text: Any, configurations: dict[str, str], path: Path) -> str | None:
        context = SubstitutionContext(
            configurations, env, path, package_share or no_package, package_prefix or no_package
        )
        try:
            return substitute(_scalar_text(text), context)
        except LaunchError:
            return None

    def visit(path: Path, configurations: dict[str, str], hidden: frozenset[str]) -> None:
        visited.add(path)
        entities = read_launch_file(path)

        def walk(items: MarkedList) -> None:
            for index, item in enumerate(items):
                tag, body, line = _entity_of(item, items, index, path)
                if tag == "arg":
                    name = _scalar_text(body["name"])
                    default = None if "default" not in body else _scalar_text(body["default"])
                    if name not in hidden:
                        result.append(
                            DeclaredArgument(
                                name=name,
                                default=default,
                                description=_scalar_text(body.get("description", "")),
                                choices=tuple(_scalar_text(c["value"]) for c in body.get("choice", ())) or None,
                                location=Location(path, line, tag),
                            )
                        )
                    if default is not None and name not in configurations:
                        value = evaluate(default, configurations, path)
                        if value is not None:
                            configurations[name] = value
                elif tag == "group":
                    walk(body if isinstance(body, MarkedList) else body["children"])
                elif tag == "include" and package_share is not None:
                    file_text = evaluate(body["file"], configurations, path)
                    if file_text is None:
                        continue
                    target = Path(file_text) if Path(file_text).is_absolute() else base / file_text
                    target = target.resolve()
                    if not target.is_file() or target in visited:
                        continue
                    passed = {
                        _scalar_text(a["name"]): evaluate(a["value"], configurations, path) for a in body.get("arg", ())
                    }
                    child = {**configurations, **{k: v for k, v in passed.items() if v is not None}}
                    try:
                        visit(target, child, frozenset(passed))
                    except LaunchError:
                        continue  # a broken included file is reported when the launch runs

        walk(entities)

    visit(launch_file.resolve(), {}, frozenset())
    return result
