"""The first pass over a YAML launch file: its tags and attributes, checked as launch_yaml reads them.

Like each launch / launch_ros action's `parse()` (which reads its attributes with `get_attr(name,
data_type=...)` before anything runs), every file is checked whole before its actions are visited:
a typo or a bad type in a branch that is never taken still fails, and every `$(...)` is parsed.
`SCHEMAS` has one entry per tag; the planner (`parser.py`) has one handler per tag.

Attribute values are typed as launch_yaml reads them: text attributes must be YAML strings, `float`
attributes (`respawn_delay`, `sigterm_timeout`, `period`) unquoted floats, and so on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from lerobot_ros.launch.errors import LaunchError, LaunchFileError, Location, SubstitutionError
from lerobot_ros.launch.marked_yaml import MarkedList, MarkedMap, YamlSyntaxError, load_marked_yaml
from lerobot_ros.launch.parameters import ParameterTypeError, parse_type
from lerobot_ros.launch.substitutions import parse_template

OTHER_FORMATS = {".py": "Python", ".xml": "XML"}  # launch files of other frontends, refused

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
SCHEMAS: dict[str, _Schema] = {
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


def entity_of(item: Any, container: MarkedList, index: int, path: Path) -> tuple[str, Any, int]:
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
        tag, body, line = entity_of(item, entities, index, path)
        location = Location(path, line, tag)
        if tag in _UNSUPPORTED_TAGS:
            raise LaunchFileError(location, f"tag {tag!r} is not supported: {_UNSUPPORTED_TAGS[tag]}")
        if tag not in SCHEMAS:
            raise LaunchFileError(
                location, f"unknown tag {tag!r}; lerobot-ros launch supports {', '.join(sorted(SCHEMAS))}"
            )
        if tag == "group" and isinstance(body, MarkedList):
            check_entities(body, path, location)
            continue
        if not isinstance(body, MarkedMap):
            raise LaunchFileError(location, f"'{tag}' must be a mapping of attributes, like '{tag}: {{name: ...}}'")
        schema = SCHEMAS[tag]
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
    if path.suffix in OTHER_FORMATS:
        raise LaunchError(
            f"{path}:1: launch: {OTHER_FORMATS[path.suffix]} launch files are not supported by lerobot-ros launch "
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
