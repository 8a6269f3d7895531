"""Reading ROS 2 YAML launch files into a `LaunchPlan`, the way launch / launch_ros's YAML frontend does.

Two passes, as in `launch`: every file is first checked against the tags and attributes it may hold
(so a typo or a bad type in a branch that is never taken still fails, and every `$(...)` is parsed),
then its actions are visited in order, each by the handler of its tag (`_Planner.HANDLERS`, like
launch_ros's per-action `parse()`/`execute()`), with the launch configurations of their scope:

- `arg` sets its default only when the configuration is not already set (command line, includer);
  an included file's required arguments (no default) must be in the include's `arg:` list;
- `let`, `push-ros-namespace`, `set_parameter`, `set_remap` change the configurations of the scope;
  `set_env` / `append_env` / `unset_env` the environment of the processes after them (and `$(env)`);
- `group` with `scoped` (the default) restores configurations and environment afterwards; `include` does not;
- `timer` runs its actions `period` seconds later with the configurations of that time (the end of
  the file); `log` prints, `shutdown` stops the launch; `for` / `for_each` repeat their actions (launch 3.8);
- `if` / `unless` take `true`/`false`/`1`/`0` (any case, stripped) after substitution.

Attribute values are typed as launch_yaml reads them: text attributes must be YAML strings, `float`
attributes (`respawn_delay`, `sigterm_timeout`, `period`) unquoted floats, and so on.
Relative paths (`include: file`, `param: from`) are resolved against the current directory like
`ros2 launch` does; write `$(dirname)/...` or `$(find-pkg-share pkg)/...` for paths next to a file.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, cast

import yaml

from lerobot_ros.launch.description import (
    OUTPUTS,
    DeclaredArgument,
    InlineParameters,
    LaunchPlan,
    LogMessage,
    NodeDetails,
    ParameterFile,
    ParameterTree,
    ProcessDescription,
    ShutdownRequest,
)
from lerobot_ros.launch.errors import LaunchError, LaunchFileError, Location, SubstitutionError
from lerobot_ros.launch.marked_yaml import MarkedList, MarkedMap, YamlSyntaxError, load_marked_yaml
from lerobot_ros.launch.parameters import (
    ParameterTypeError,
    flatten_parameters,
    global_parameter_rule,
    global_parameter_value,
    parameter_value,
    parse_type,
)
from lerobot_ros.launch.substitutions import (
    SubstitutionContext,
    Template,
    evaluate,
    parse_template,
    split_command_line,
    typed_bool,
    unescape,
)

ROS_NAMESPACE = "ros_namespace"
_NAME_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CLI_ARGUMENT = re.compile(r"^([^\s:=]+):=(.*)$", re.DOTALL)
_MAX_INCLUDE_DEPTH = 32
_OTHER_FORMATS = {".py": "Python", ".xml": "XML"}

# Attribute kinds, with how launch_yaml reads them (`get_attr(name, data_type=...)`):
TEXT = "text"  # a string, substituted
RAW = "raw"  # a string, used as written (after backslash escapes)
BOOL = "bool"  # an unquoted YAML bool
BOOL_SUBST = "bool_subst"  # an unquoted bool, or text whose substituted value is a bool
BOOL_SUBST_STRICT = "bool_subst_strict"  # an unquoted bool, or text with $(...) giving a bool
FLOAT = "float"  # an unquoted YAML float
FLOAT_SUBST = "float_subst"  # an unquoted float, or text with $(...) giving a float
INT = "int"  # an unquoted YAML int
ENTITIES = "entities"  # a list of mappings (sub-entities)
CHILDREN = "children"  # a list of actions
ANY = "any"  # a scalar or list (param value / type)


@dataclass(frozen=True)
class _Schema:
    attributes: Mapping[str, str]
    required: frozenset[str] = frozenset()
    conditions: bool = True  # takes `if` / `unless`


_PROCESS = {
    "name": TEXT,
    "cwd": TEXT,
    "env": ENTITIES,
    "output": TEXT,
    "respawn": TEXT,
    "respawn_delay": FLOAT,
    "respawn_max_retries": INT,
    "on_exit": RAW,
    "launch-prefix": TEXT,
    "sigterm_timeout": FLOAT,
    "sigkill_timeout": FLOAT,
    "emulate_tty": BOOL,
}
_SCHEMAS: dict[str, _Schema] = {
    "arg": _Schema({"name": RAW, "default": TEXT, "description": RAW, "choice": ENTITIES}, frozenset({"name"})),
    "let": _Schema({"name": TEXT, "value": TEXT}, frozenset({"name", "value"})),
    "node": _Schema(
        {
            **_PROCESS,
            "pkg": TEXT,
            "exec": TEXT,
            "exec_name": TEXT,
            "namespace": TEXT,
            "args": TEXT,
            "ros_args": TEXT,
            "param": ENTITIES,
            "remap": ENTITIES,
        },
        frozenset({"exec"}),
    ),
    "executable": _Schema({**_PROCESS, "cmd": TEXT}, frozenset({"cmd"})),
    "include": _Schema({"file": TEXT, "arg": ENTITIES}, frozenset({"file"})),
    "group": _Schema({"scoped": BOOL, "children": CHILDREN}, frozenset({"children"})),
    "push-ros-namespace": _Schema({"namespace": TEXT}, frozenset({"namespace"})),
    "push_ros_namespace": _Schema({"namespace": TEXT}, frozenset({"namespace"})),
    "set_env": _Schema({"name": TEXT, "value": TEXT}, frozenset({"name", "value"})),
    "append_env": _Schema(
        {"name": TEXT, "value": TEXT, "prepend": BOOL_SUBST_STRICT, "separator": TEXT}, frozenset({"name", "value"})
    ),
    "unset_env": _Schema({"name": TEXT}, frozenset({"name"})),
    "set_parameter": _Schema({"name": TEXT, "value": TEXT}, frozenset({"name", "value"})),
    "set_remap": _Schema({"from": TEXT, "to": TEXT}, frozenset({"from", "to"})),
    "log": _Schema({"message": TEXT}, frozenset({"message"})),
    "shutdown": _Schema({"reason": TEXT}),
    "timer": _Schema(
        {"period": FLOAT_SUBST, "cancel_on_shutdown": BOOL_SUBST_STRICT, "children": CHILDREN},
        frozenset({"period", "children"}),
    ),
    "for": _Schema({"len": TEXT, "name": RAW, "children": CHILDREN}, frozenset({"len", "name", "children"})),
    "for_each": _Schema({"values": TEXT, "children": CHILDREN}, frozenset({"values", "children"})),
}
_SUB_SCHEMAS: dict[tuple[str, str], _Schema] = {
    ("node", "remap"): _Schema({"from": TEXT, "to": TEXT}, frozenset({"from", "to"}), conditions=False),
    ("node", "env"): _Schema({"name": TEXT, "value": TEXT}, frozenset({"name", "value"}), conditions=False),
    ("executable", "env"): _Schema({"name": TEXT, "value": TEXT}, frozenset({"name", "value"}), conditions=False),
    ("include", "arg"): _Schema({"name": TEXT, "value": TEXT}, frozenset({"name", "value"}), conditions=False),
    ("arg", "choice"): _Schema({"value": RAW}, frozenset({"value"}), conditions=False),
    ("node", "param"): _Schema(
        {"name": TEXT, "value": ANY, "type": ANY, "param": ENTITIES, "from": TEXT, "allow_substs": BOOL_SUBST},
        conditions=False,
    ),
}
_ATTRIBUTE_HINTS = {
    ("node", "ros_namespace"): "use 'namespace' (launch_ros's node has no 'ros_namespace' attribute)",
    ("executable", "args"): "launch's executable has no 'args'; put the arguments in 'cmd'",
    ("node", "shell"): "'shell' is not supported by lerobot-ros launch; run 'sh -c ...' as an executable",
    ("executable", "shell"): "'shell' is not supported by lerobot-ros launch; write cmd: sh -c '...'",
    ("group", "forwarding"): "'forwarding' is not supported by lerobot-ros launch",
    ("group", "keep"): "'keep' is not supported by lerobot-ros launch",
}
_UNSUPPORTED_TAGS = {
    "node_container": "composable nodes are not supported by lerobot-ros launch",
    "load_composable_node": "composable nodes are not supported by lerobot-ros launch",
    "ros_timer": "ros_timer (ROS time) is not supported by lerobot-ros launch; use timer",
    "set_use_sim_time": "write set_parameter: {name: use_sim_time, value: 'true'}",
    "set_ros_log_dir": "not supported by lerobot-ros launch; use --log-dir",
    "set_parameters_from_file": (
        "not supported by lerobot-ros launch; give the file to each node as param: [{from: FILE}]"
    ),
    "reset_env": "not supported by lerobot-ros launch",
    "reset": "not supported by lerobot-ros launch",
    "lifecycle_node": "lifecycle transitions are not supported by lerobot-ros launch",
}


def _entity_of(item: Any, container: MarkedList, index: int, path: Path) -> tuple[str, Any, int]:
    line = container.item_lines[index]
    if not isinstance(item, MarkedMap) or len(item) != 1:
        raise LaunchFileError(
            Location(path, line, "launch"),
            "each list item must be a mapping with exactly one tag, like '- node: {...}'; fix the indentation",
        )
    ((tag, body),) = item.items()
    return str(tag), body, line


def _kind_error(kind: str, key: str, value: Any) -> str | None:
    """Why `value` does not fit an attribute of `kind` as launch_yaml reads it; None when it fits."""
    if kind in (TEXT, RAW):
        if not isinstance(value, str):
            return (
                f'attribute {key!r} must be a string, got {value!r}; quote it ({key}: "{value}") '
                "- launch_yaml does not convert values"
            )
    elif kind == BOOL:
        if not isinstance(value, bool):
            return (
                f"attribute {key!r} must be an unquoted true or false, got {value!r} "
                "(launch_ros would take any non-empty string as true)"
            )
    elif kind in (BOOL_SUBST, BOOL_SUBST_STRICT):
        if not isinstance(value, (bool, str)):
            return f"attribute {key!r} must be true/false, got {value!r}"
        if kind == BOOL_SUBST_STRICT and isinstance(value, str) and "$(" not in value:
            return f"attribute {key!r} must be an unquoted true or false (or a $(...)), got {value!r}"
    elif kind == FLOAT:
        if not isinstance(value, float):
            how = f"write {value}.0" if isinstance(value, int) and not isinstance(value, bool) else "write e.g. 2.0"
            return f"attribute {key!r} must be an unquoted float (launch_ros compares it as a number); {how}"
    elif kind == FLOAT_SUBST:
        if isinstance(value, str) and "$(" in value:
            return None
        if not isinstance(value, float):
            return f"attribute {key!r} must be an unquoted float like 2.0 (or a $(...)), got {value!r}"
    elif kind == INT:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"attribute {key!r} must be an unquoted integer, got {value!r}"
    elif kind in (ENTITIES, CHILDREN):
        if not isinstance(value, MarkedList) or not all(isinstance(v, MarkedMap) for v in value) or not value:
            example = "- node: ..." if kind == CHILDREN else "{...}"
            return f"attribute {key!r} must be a list of mappings, like '{key}: [{example}]'"
    elif kind == ANY and isinstance(value, MarkedMap):
        return f"attribute {key!r} cannot be a mapping; use nested 'param' entries"
    return None


def _check_templates(value: Any, location: Location) -> None:
    try:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                parse_template(item)
    except SubstitutionError as err:
        raise LaunchFileError(location, str(err)) from None


def _check_attributes(body: MarkedMap, schema: _Schema, location: Location, path: Path, owner: str) -> None:
    allowed = dict(schema.attributes)
    if schema.conditions:
        allowed.update({"if": TEXT, "unless": TEXT})
    for key, value in body.items():
        where = Location(path, body.line_of(key), location.tag)
        if key not in allowed:
            hint = _ATTRIBUTE_HINTS.get((owner, str(key)), "remove it or fix its spelling")
            raise LaunchFileError(where, f"unknown attribute {key!r} (allowed: {', '.join(sorted(allowed))}); {hint}")
        problem = _kind_error(allowed[key], str(key), value)
        if problem is not None:
            raise LaunchFileError(where, problem)
        if allowed[key] in (TEXT, BOOL_SUBST, BOOL_SUBST_STRICT, FLOAT_SUBST, ANY):
            _check_templates(value, where)
    if "if" in body and "unless" in body:
        raise LaunchFileError(location, "'if' and 'unless' cannot both be given; keep one")
    missing = sorted(schema.required - set(body))
    if missing:
        raise LaunchFileError(location, f"missing required attribute {missing[0]!r}; add '{missing[0]}: ...'")


def check_entities(entities: Any, path: Path, where: Location) -> None:
    """Check tags, attributes (with their YAML types) and sub-entities of a list of actions."""
    if not isinstance(entities, MarkedList):
        raise LaunchFileError(where, "expected a list of actions ('- node: ...', '- arg: ...')")
    for index, item in enumerate(entities):
        tag, body, line = _entity_of(item, entities, index, path)
        location = Location(path, line, tag)
        if tag in _UNSUPPORTED_TAGS:
            raise LaunchFileError(location, f"tag {tag!r} is not supported: {_UNSUPPORTED_TAGS[tag]}")
        if tag not in _SCHEMAS:
            raise LaunchFileError(
                location, f"unknown tag {tag!r}; lerobot-ros launch supports {', '.join(sorted(_SCHEMAS))}"
            )
        if tag == "group" and isinstance(body, MarkedList):
            check_entities(body, path, location)
            continue
        if not isinstance(body, MarkedMap):
            raise LaunchFileError(location, f"'{tag}' must be a mapping of attributes, like '{tag}: {{name: ...}}'")
        schema = _SCHEMAS[tag]
        _check_attributes(body, schema, location, path, tag)
        for key, kind in schema.attributes.items():
            if key not in body:
                continue
            if kind == CHILDREN:
                check_entities(body[key], path, location)
            elif kind == ENTITIES:
                for sub_index, sub_body in enumerate(body[key]):
                    sub_location = Location(path, body[key].item_lines[sub_index], f"{tag} {key}")
                    if (tag, key) == ("node", "param"):
                        _check_param(sub_body, sub_location, path)
                    else:
                        _check_attributes(sub_body, _SUB_SCHEMAS[(tag, key)], sub_location, path, f"{tag} {key}")


def _check_param(body: MarkedMap, location: Location, path: Path, nested: bool = False) -> None:
    _check_attributes(body, _SUB_SCHEMAS[("node", "param")], location, path, "node param")
    if "from" in body:
        if nested:
            raise LaunchFileError(location, "'from' is not allowed in a nested param; move it to the node's param list")
        extra = set(body) - {"from", "allow_substs"}
        if extra:
            raise LaunchFileError(location, f"'from' excludes {', '.join(sorted(extra))}; give a params file or a name")
        return
    if "allow_substs" in body:
        raise LaunchFileError(location, "'allow_substs' can only be used together with 'from'")
    if "name" not in body:
        raise LaunchFileError(
            location, "a param needs 'name' (with 'value' or nested 'param') or 'from' (a params file)"
        )
    has_value = body.get("value") is not None
    if has_value == ("param" in body):
        raise LaunchFileError(location, f"param {body['name']!r} needs exactly one of 'value' or nested 'param'")
    if "type" in body:
        if "param" in body:
            raise LaunchFileError(location, "'type' cannot be combined with nested 'param'")
        try:
            parse_type(body["type"])
        except ParameterTypeError as err:
            raise LaunchFileError(location, f"param {body['name']!r}: {err}") from None
    if "param" in body:
        for index, sub_body in enumerate(body["param"]):
            _check_param(sub_body, Location(path, body["param"].item_lines[index], location.tag), path, nested=True)


def read_launch_file(path: Path) -> MarkedList:
    """Load and check one launch file; returns its list of actions."""
    if path.suffix in _OTHER_FORMATS:
        raise LaunchError(
            f"{path}:1: launch: {_OTHER_FORMATS[path.suffix]} launch files are not supported by lerobot-ros launch "
            "(only the YAML format); run it with ros2 launch, or write it as a .launch.yaml file"
        )
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


def prefix_namespace(base: str | None, namespace: str | None) -> str | None:
    """`namespace` under `base`, as launch_ros's `prefix_namespace`: an absolute namespace replaces the base."""
    if base is None and namespace is None:
        return None
    if namespace is None:
        combined = cast(str, base)
    elif not base or namespace.startswith("/"):
        combined = namespace
    else:
        combined = ("" if base == "/" else base) + "/" + namespace
    return combined if combined == "/" else combined.rstrip("/")


def make_namespace_absolute(namespace: str | None) -> str | None:
    if namespace is None:
        return None
    return namespace if namespace.startswith("/") else "/" + namespace


def _validate_namespace(namespace: str, location: Location) -> str:
    """rmw's namespace rules (launch_ros validates with them): `/` or `/token/token...`."""
    tokens = namespace.split("/")[1:]
    if namespace != "/" and (not namespace.startswith("/") or "" in tokens):
        raise LaunchFileError(location, f"invalid namespace {namespace!r}: no empty parts ('//' or a trailing '/')")
    for token in tokens if namespace != "/" else []:
        if not _NAME_TOKEN.match(token):
            raise LaunchFileError(
                location,
                f"invalid namespace {namespace!r}: {token!r} must be letters, digits and '_', "
                "not starting with a digit",
            )
    return namespace


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


@dataclass
class _Scope:
    """What a scoped `group` saves and restores: launch configurations and environment.

    `global_params` / `global_remaps` live in launch's configurations too; like there, a list that
    existed before a group is shared with it (a `set_parameter` inside the group extends it).
    """

    configurations: dict[str, str]
    environ: dict[str, str]
    env_changes: dict[str, str | None]
    global_params: list[str] | None = None
    global_remaps: list[tuple[str, str]] | None = None

    def copy(self) -> _Scope:
        return _Scope(
            dict(self.configurations),
            dict(self.environ),
            dict(self.env_changes),
            self.global_params,
            self.global_remaps,
        )


@dataclass
class _Deferred:
    """The actions of a `timer`, run after the file with the configurations of that time."""

    delay: float
    children: MarkedList
    path: Path
    included_by: Location | None
    order: int
    cancel_on_shutdown: bool = True


@dataclass
class _Frame:
    """Where the visitor is: the file, its includer, the enclosing loops, the timer delay."""

    path: Path
    included_by: Location | None
    delay: float = 0.0
    loop_indices: dict[str, int] = field(default_factory=dict)
    loop_values: dict[str, str] = field(default_factory=dict)


Handler = Callable[["_Planner", Any, Location, _Frame], None]


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
        self.base_environ = dict(environ)
        self.scope = _Scope(dict(cli_arguments), dict(environ), {})
        self.cwd = cwd
        self.processes: list[ProcessDescription] = []
        self.declared: list[DeclaredArgument] = []
        self.messages: list[LogMessage] = []
        self.shutdown: ShutdownRequest | None = None
        self.include_stack: list[Path] = []
        self.deferred: list[_Deferred] = []
        self._files: dict[Path, MarkedList] = {}

    @property
    def configurations(self) -> dict[str, str]:
        return self.scope.configurations

    def context(self, frame: _Frame) -> SubstitutionContext:
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

    def sub(self, value: Any, location: Location, frame: _Frame) -> str:
        try:
            return evaluate(parse_template(_scalar_text(value)), self.context(frame))
        except LaunchError as err:
            raise LaunchFileError(location, str(err)) from None

    def split(self, value: Any, location: Location, frame: _Frame) -> list[str]:
        try:
            return split_command_line(_scalar_text(value), self.context(frame))
        except LaunchError as err:
            raise LaunchFileError(location, str(err)) from None

    def typed_bool(self, value: Any, location: Location, frame: _Frame, attribute: str) -> bool:
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
        path = path.resolve()
        if path in self.include_stack or len(self.include_stack) >= _MAX_INCLUDE_DEPTH:
            chain = " -> ".join(str(p) for p in [*self.include_stack, path])
            assert included_by is not None
            raise LaunchFileError(included_by, f"include cycle: {chain}; remove the include that loops back")
        entities = self.load(path)
        self.include_stack.append(path)
        try:
            self.run_entities(entities, _Frame(path, included_by))
        finally:
            self.include_stack.pop()

    def run_deferred(self) -> None:
        while self.deferred:
            self.deferred.sort(key=lambda d: (d.delay, d.order))
            timer = self.deferred.pop(0)
            if timer.cancel_on_shutdown and self.shutdown is not None and self.shutdown.delay <= timer.delay:
                continue  # launch cancels pending timers on shutdown
            self.run_entities(timer.children, _Frame(timer.path, timer.included_by, timer.delay))

    def run_entities(self, entities: MarkedList, frame: _Frame) -> None:
        for index, item in enumerate(entities):
            tag, body, line = _entity_of(item, entities, index, frame.path)
            location = Location(frame.path, line, tag)
            if isinstance(body, MarkedMap) and not self.condition_holds(body, location, frame):
                continue
            self.HANDLERS[tag](self, body, location, frame)

    def condition_holds(self, body: MarkedMap, location: Location, frame: _Frame) -> bool:
        if "if" in body:
            return _condition(self.sub(body["if"], location, frame), location, "'if'")
        if "unless" in body:
            return not _condition(self.sub(body["unless"], location, frame), location, "'unless'")
        return True

    def arg(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        name = unescape(body["name"])
        default = body.get("default")
        choices = tuple(unescape(c["value"]) for c in body.get("choice", ())) or None
        description = unescape(body.get("description", ""))
        self.declared.append(DeclaredArgument(name, default, description, choices, location))
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

    def let(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        self.configurations[self.sub(body["name"], location, frame)] = self.sub(body["value"], location, frame)

    def push_ros_namespace(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        namespace = self.sub(body["namespace"], location, frame)
        combined = make_namespace_absolute(prefix_namespace(self.configurations.get(ROS_NAMESPACE), namespace))
        self.configurations[ROS_NAMESPACE] = _validate_namespace(combined or "/", location)

    def set_env(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        name, value = self.sub(body["name"], location, frame), self.sub(body["value"], location, frame)
        self.scope.environ[name] = value
        self.scope.env_changes[name] = value

    def append_env(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        name, value = self.sub(body["name"], location, frame), self.sub(body["value"], location, frame)
        prepend = self.typed_bool(body["prepend"], location, frame, "prepend") if "prepend" in body else False
        separator = self.sub(body["separator"], location, frame) if "separator" in body else os.pathsep
        current = self.scope.environ.get(name)
        if current is not None:
            value = value + separator + current if prepend else current + separator + value
        self.scope.environ[name] = value
        self.scope.env_changes[name] = value

    def unset_env(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        name = self.sub(body["name"], location, frame)
        self.scope.environ.pop(name, None)
        self.scope.env_changes[name] = None

    def set_parameter(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        name = self.sub(body["name"], location, frame)
        try:
            value = global_parameter_value(self.sub(body["value"], location, frame))
        except ParameterTypeError as err:
            raise LaunchFileError(location, f"parameter {name!r}: {err}") from None
        if self.scope.global_params is None:
            self.scope.global_params = []
        self.scope.global_params.append(global_parameter_rule(name, value))

    def set_remap(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        rule = (self.sub(body["from"], location, frame), self.sub(body["to"], location, frame))
        if self.scope.global_remaps is None:
            self.scope.global_remaps = []
        self.scope.global_remaps.append(rule)

    def log(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        self.messages.append(LogMessage(self.sub(body["message"], location, frame), location, frame.delay))

    def shutdown_action(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        reason = self.sub(body["reason"], location, frame) if body.get("reason") else "shutdown action"
        if self.shutdown is None or frame.delay < self.shutdown.delay:
            self.shutdown = ShutdownRequest(reason, location, frame.delay)

    def timer(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
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

    def for_loop(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        text = self.sub(body["len"], location, frame)
        try:
            length = int(text)
        except ValueError:
            raise LaunchFileError(location, f"len must be an integer, got {text!r}") from None
        name = unescape(body["name"])
        for index in range(length):
            inner = replace(frame, loop_indices={**frame.loop_indices, name: index})
            self.run_entities(body["children"], inner)

    def for_each(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        text = self.sub(body["values"], location, frame)
        for chunk in text.split(";"):
            if not chunk.strip():
                continue
            try:
                values = yaml.safe_load(chunk)
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

    def group(self, body: MarkedMap | MarkedList, location: Location, frame: _Frame) -> None:
        children = body if isinstance(body, MarkedList) else body["children"]
        scoped = True if isinstance(body, MarkedList) else bool(body.get("scoped", True))
        saved = self.scope.copy()
        try:
            self.run_entities(children, frame)
        finally:
            if scoped:
                self.scope = saved

    def include(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        text = self.sub(body["file"], location, frame)
        target = self.resolve_path(text)
        if target.suffix in _OTHER_FORMATS:
            raise LaunchFileError(
                location,
                f"{target.name}: {_OTHER_FORMATS[target.suffix]} launch files are not supported by lerobot-ros launch "
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
        self.check_required_arguments(target.resolve(), [name for name, _ in arguments], location)
        for name, value in arguments:
            self.configurations[name] = value
        self.run_file(target, location)

    def check_required_arguments(self, target: Path, given: list[str], location: Location | None) -> None:
        """launch's IncludeLaunchDescription check: required args found statically must be passed by the include.

        `location` is the include; None for the file given to the launcher (its include is the command line).
        """
        try:
            entities = self.load(target)
        except LaunchError:
            return  # reported when the file runs
        for declaration in _static_arguments(entities, target, self.base_environ, self, [], False, set()):
            if declaration.conditional or declaration.has_default:
                continue
            names = [*given, *(n for chain in declaration.chain for n in chain)]
            if declaration.name not in names and location is None:
                raise LaunchFileError(
                    declaration.location,
                    f"argument {declaration.name!r} is required (it has no default); pass {declaration.name}:=VALUE",
                )
            if declaration.name not in names:
                assert location is not None
                raise LaunchFileError(
                    location,
                    f"the included file {target.name} requires argument {declaration.name!r} "
                    f"(declared at {declaration.location.path.name}:{declaration.location.line}); add "
                    f"{{name: {declaration.name}, value: ...}} to this include's 'arg' list "
                    "(ros2 launch does not take it from the command line)",
                )

    def process_common(self, body: MarkedMap, location: Location, frame: _Frame) -> dict[str, Any]:
        common: dict[str, Any] = {}
        env = {self.sub(e["name"], location, frame): self.sub(e["value"], location, frame) for e in body.get("env", ())}
        changes = self.scope.env_changes
        common["additional_env"] = {**{k: v for k, v in changes.items() if v is not None}, **env}
        common["unset_env"] = tuple(sorted(k for k, v in changes.items() if v is None and k not in env))
        if "cwd" in body:
            common["cwd"] = Path(self.sub(body["cwd"], location, frame))
        if "output" in body:
            output = self.sub(body["output"], location, frame)
            if output not in OUTPUTS:
                raise LaunchFileError(location, f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
            common["output"] = output
        if "respawn" in body:
            common["respawn"] = self.typed_bool(body["respawn"], location, frame, "respawn")
        for attribute in ("respawn_delay", "sigterm_timeout", "sigkill_timeout"):
            if attribute in body:
                if body[attribute] < 0:
                    raise LaunchFileError(location, f"{attribute} must be >= 0, got {body[attribute]}")
                common[attribute] = body[attribute]
        if "respawn_max_retries" in body:
            common["respawn_max_retries"] = body["respawn_max_retries"]
        if "on_exit" in body:
            if body["on_exit"] != "shutdown":
                raise LaunchFileError(location, f"on_exit supports only 'shutdown', got {body['on_exit']!r}")
            common["required"] = True
        if "emulate_tty" in body:
            common["emulate_tty"] = body["emulate_tty"]
        common["start_delay"] = frame.delay
        return common

    def label(self, base: str) -> str:
        return f"{base}-{len(self.processes) + 1}"

    def check_program(self, program: str, location: Location) -> None:
        """A program given without a package must exist (launch would fail when starting it)."""
        if "/" in program:
            resolved = self.resolve_path(program)
            if not (resolved.is_file() and os.access(resolved, os.X_OK)):
                raise LaunchFileError(location, f"{resolved} is not an executable file; check the path")
        elif shutil.which(program, path=self.scope.environ.get("PATH", os.defpath)) is None:
            raise LaunchFileError(location, f"command {program!r} is not on PATH; install it or give its full path")

    def prefix(self, body: MarkedMap, location: Location, frame: _Frame) -> list[str]:
        if "launch-prefix" not in body:
            return []
        text = self.sub(body["launch-prefix"], location, frame)
        try:
            return shlex.split(text)
        except ValueError as err:
            raise LaunchFileError(location, f"launch-prefix {text!r}: {err}") from None

    def executable(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        common = self.process_common(body, location, frame)
        command = self.split(body["cmd"], location, frame)
        if not command or not command[0]:
            raise LaunchFileError(location, "cmd is empty; give the program to run")
        self.check_program(command[0], location)
        command = self.prefix(body, location, frame) + command
        base = self.sub(body["name"], location, frame) if "name" in body else Path(command[0]).name
        self.processes.append(
            ProcessDescription(label=self.label(base), command=tuple(command), location=location, **common)
        )

    def node(self, body: MarkedMap, location: Location, frame: _Frame) -> None:
        common = self.process_common(body, location, frame)
        executable = self.sub(body["exec"], location, frame)
        package = self.sub(body["pkg"], location, frame) if "pkg" in body else None
        if package is not None:
            try:
                program = str(self.find_executable(package, executable))
            except LaunchError as err:
                raise LaunchFileError(location, str(err)) from None
        else:
            program = executable
            self.check_program(program, location)
        name = self.sub(body["name"], location, frame) if "name" in body else None
        if name is not None and not _NAME_TOKEN.match(name):
            raise LaunchFileError(
                location, f"invalid node name {name!r}: use letters, digits and '_', not starting with a digit"
            )
        namespace_attr = self.sub(body["namespace"], location, frame) if "namespace" in body else None
        namespace = make_namespace_absolute(prefix_namespace(self.configurations.get(ROS_NAMESPACE), namespace_attr))
        if namespace is not None:
            namespace = _validate_namespace(namespace, location)
        arguments = self.split(body["args"], location, frame) if "args" in body else []
        if "ros_args" in body:
            arguments += ["--ros-args", *self.split(body["ros_args"], location, frame)]
        remaps = [
            (self.sub(r["from"], location, frame), self.sub(r["to"], location, frame)) for r in body.get("remap", ())
        ]
        details = NodeDetails(
            package=package or "",
            executable=executable,
            name=name,
            namespace=namespace,
            parameters=self.parameters(body.get("param"), location, frame),
            remappings=tuple([*(self.scope.global_remaps or []), *remaps]),
            global_parameters=tuple(self.scope.global_params or []),
        )
        command = [*self.prefix(body, location, frame), program, *arguments]
        base = self.sub(body["exec_name"], location, frame) if "exec_name" in body else Path(command[0]).name
        self.processes.append(
            ProcessDescription(
                label=self.label(base), command=tuple(command), location=location, node=details, **common
            )
        )

    def parameters(
        self, entries: MarkedList | None, location: Location, frame: _Frame
    ) -> tuple[InlineParameters | ParameterFile, ...]:
        """One source per `param` entry, in order (launch_ros writes one params file per inline entry)."""
        if not entries:
            return ()
        sources: list[InlineParameters | ParameterFile] = []
        for index, entry in enumerate(entries):
            entry_location = Location(frame.path, entries.item_lines[index], "node param")
            if "from" in entry:
                sources.append(self.parameter_file(entry, entry_location, frame))
            else:
                sources.append(
                    InlineParameters(flatten_parameters(self.parameter_tree([entry], entry_location, frame)))
                )
        return tuple(sources)

    def parameter_tree(self, entries: Sequence[MarkedMap], location: Location, frame: _Frame) -> ParameterTree:
        tree: ParameterTree = {}
        for entry in entries:
            name = self.sub(entry["name"], location, frame)
            if "param" in entry:
                tree[name] = self.parameter_tree(entry["param"], location, frame)
                continue

            def evaluate_template(template: Template) -> str:
                try:
                    return evaluate(template, self.context(frame))
                except LaunchError as err:
                    raise LaunchFileError(location, str(err)) from None

            try:
                tree[name] = parameter_value(entry["value"], entry.get("type"), evaluate_template)
            except ParameterTypeError as err:
                raise LaunchFileError(location, f"param {name!r}: {err}") from None
        return tree

    def parameter_file(self, entry: MarkedMap, location: Location, frame: _Frame) -> ParameterFile:
        file_path = self.resolve_path(self.sub(entry["from"], location, frame))
        allow_substs = (
            self.typed_bool(entry["allow_substs"], location, frame, "allow_substs")
            if "allow_substs" in entry
            else False
        )
        try:
            text = file_path.read_text()
        except FileNotFoundError:
            raise LaunchFileError(
                location, f"params file {file_path} does not exist; fix the path (try $(find-pkg-share PKG)/config/...)"
            ) from None
        except OSError as err:
            raise LaunchFileError(location, f"params file {file_path} cannot be read: {err.strerror}") from None
        substituted = self.sub(text, location, frame) if allow_substs else None
        try:
            content = yaml.safe_load(substituted if substituted is not None else text)
        except yaml.YAMLError as err:
            raise LaunchFileError(
                location, f"params file {file_path} is not valid YAML: {' '.join(str(err).split())}"
            ) from None
        if not _is_params_file(content):
            raise LaunchFileError(
                location,
                f"{file_path} is not a ROS 2 params file: put the parameters under "
                "'/**: {ros__parameters: {...}}' or 'NODE_NAME: {ros__parameters: {...}}'",
            )
        return ParameterFile(file_path, substituted)

    HANDLERS: ClassVar[dict[str, Handler]] = {
        "arg": arg,
        "let": let,
        "node": node,
        "executable": executable,
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


@dataclass(frozen=True)
class _StaticArgument:
    name: str
    has_default: bool
    conditional: bool
    location: Location
    chain: tuple[tuple[str, ...], ...]  # argument names given by each include between the file and the arg


def _static_arguments(
    entities: MarkedList,
    path: Path,
    environ: Mapping[str, str],
    planner: _Planner,
    chain: list[tuple[str, ...]],
    conditional: bool,
    seen: set[str],
) -> list[_StaticArgument]:
    """The `arg`s launch finds in a file without running it (LaunchDescription.get_launch_arguments_with_...).

    Includes are followed when their path evaluates without a context (no `$(var)`, `$(dirname)`);
    an `arg` with `if`/`unless`, or under one, is conditional; the first declaration of a name counts.
    """
    found: list[_StaticArgument] = []

    def without_context(value: Any) -> str | None:
        try:
            context = SubstitutionContext(
                {}, environ, Path("/nonexistent"), planner.package_share, planner.package_prefix
            )
            template = parse_template(_scalar_text(value))
            if any(not isinstance(p, str) and p.name in ("dirname", "filename") for p in template):
                return None
            return evaluate(template, context)
        except LaunchError:
            return None

    for index, item in enumerate(entities):
        tag, body, line = _entity_of(item, entities, index, path)
        has_condition = isinstance(body, MarkedMap) and ("if" in body or "unless" in body)
        if tag == "arg":
            name = unescape(body["name"])
            if name not in seen:
                seen.add(name)
                found.append(
                    _StaticArgument(
                        name, "default" in body, conditional or has_condition, Location(path, line, tag), tuple(chain)
                    )
                )
        elif tag == "group":
            children = body if isinstance(body, MarkedList) else body["children"]
            found += _static_arguments(children, path, environ, planner, chain, conditional or has_condition, seen)
        elif tag == "timer":
            found += _static_arguments(body["children"], path, environ, planner, chain, True, seen)
        elif tag == "include":
            text = without_context(body["file"])
            if text is None or not Path(text).is_absolute() or Path(text).suffix in _OTHER_FORMATS:
                continue
            try:
                child = planner.load(Path(text).resolve())
            except LaunchError:
                continue
            names = [without_context(a["name"]) for a in body.get("arg", ())]
            given = tuple(n for n in names if n is not None)
            found += _static_arguments(
                child, Path(text).resolve(), environ, planner, [*chain, given], conditional or has_condition, seen
            )
    return found


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
    planner = _Planner(
        package_share,
        package_prefix,
        find_executable,
        dict(os.environ) if environ is None else environ,
        Path.cwd() if cwd is None else cwd,
        cli_arguments,
    )
    launch_file = launch_file.resolve()
    planner.check_required_arguments(launch_file, list(cli_arguments), None)
    planner.run_file(launch_file, None)
    planner.run_deferred()
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
        configurations={k: v for k, v in planner.configurations.items()},
        messages=tuple(planner.messages),
        shutdown=planner.shutdown,
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

    def evaluate_text(text: Any, configurations: dict[str, str], path: Path) -> str | None:
        context = SubstitutionContext(
            configurations, env, path, package_share or no_package, package_prefix or no_package
        )
        try:
            return evaluate(parse_template(_scalar_text(text)), context)
        except LaunchError:
            return None

    def visit(path: Path, configurations: dict[str, str], hidden: frozenset[str]) -> None:
        visited.add(path)
        entities = read_launch_file(path)

        def walk(items: MarkedList) -> None:
            for index, item in enumerate(items):
                tag, body, line = _entity_of(item, items, index, path)
                if tag == "arg":
                    name = unescape(_scalar_text(body["name"]))
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
                        value = evaluate_text(default, configurations, path)
                        if value is not None:
                            configurations[name] = value
                elif tag == "group":
                    walk(body if isinstance(body, MarkedList) else body["children"])
                elif tag in ("timer", "for", "for_each"):
                    walk(body["children"])
                elif tag == "include" and package_share is not None:
                    file_text = evaluate_text(body["file"], configurations, path)
                    if file_text is None:
                        continue
                    target = Path(file_text) if Path(file_text).is_absolute() else base / file_text
                    target = target.resolve()
                    if not target.is_file() or target in visited:
                        continue
                    passed = {
                        _scalar_text(a["name"]): evaluate_text(a["value"], configurations, path)
                        for a in body.get("arg", ())
                    }
                    child = {**configurations, **{k: v for k, v in passed.items() if v is not None}}
                    try:
                        visit(target, child, frozenset(passed))
                    except LaunchError:
                        continue  # a broken included file is reported when the launch runs

        walk(entities)

    visit(launch_file.resolve(), {}, frozenset())
    return result
