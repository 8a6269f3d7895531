"""The `node` and `executable` handlers: what launch's ExecuteProcess and launch_ros's Node make of their attributes.

A process's command line, environment and options; a node's name, namespace (launch_ros's rules),
parameters (one source per `param` entry, in order) and remappings. Each handler takes the planner
that visits the file (substitutions, scope, the plan so far), as an action's `execute()` takes the
launch context.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import yaml

from lerobot_ros.bounded_yaml import load_yaml
from lerobot_ros.launch.description import (
    OUTPUTS,
    InlineParameters,
    NodeDetails,
    ParameterFile,
    ParameterTree,
    ProcessDescription,
)
from lerobot_ros.launch.errors import LaunchError, LaunchFileError, Location
from lerobot_ros.launch.marked_yaml import MarkedList, MarkedMap
from lerobot_ros.launch.parameters import ParameterTypeError, flatten_parameters, parameter_value
from lerobot_ros.launch.substitutions import Template, evaluate
from lerobot_ros.launch.visit import Frame, Visitor

ROS_NAMESPACE = "ros_namespace"  # the launch configuration push-ros-namespace sets
NAME_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


def validate_namespace(namespace: str, location: Location) -> str:
    """rmw's namespace rules (launch_ros validates with them): `/` or `/token/token...`."""
    tokens = namespace.split("/")[1:]
    if namespace != "/" and (not namespace.startswith("/") or "" in tokens):
        raise LaunchFileError(location, f"invalid namespace {namespace!r}: no empty parts ('//' or a trailing '/')")
    for token in tokens if namespace != "/" else []:
        if not NAME_TOKEN.match(token):
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


def _process_common(planner: Visitor, body: MarkedMap, location: Location, frame: Frame) -> dict[str, Any]:
    common: dict[str, Any] = {}
    env = {
        planner.sub(e["name"], location, frame): planner.sub(e["value"], location, frame) for e in body.get("env", ())
    }
    changes = planner.scope.env_changes
    common["additional_env"] = {**{k: v for k, v in changes.items() if v is not None}, **env}
    common["unset_env"] = tuple(sorted(k for k, v in changes.items() if v is None and k not in env))
    if "cwd" in body:
        common["cwd"] = Path(planner.sub(body["cwd"], location, frame))
    if "output" in body:
        output = planner.sub(body["output"], location, frame)
        if output not in OUTPUTS:
            raise LaunchFileError(location, f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
        common["output"] = output
    if "respawn" in body:
        common["respawn"] = planner.typed_bool(body["respawn"], location, frame, "respawn")
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


def _label(planner: Visitor, base: str) -> str:
    return f"{base}-{len(planner.processes) + 1}"


def _check_program(planner: Visitor, program: str, location: Location) -> None:
    """A program given without a package must exist (launch would fail when starting it)."""
    if "/" in program:
        resolved = planner.resolve_path(program)
        if not (resolved.is_file() and os.access(resolved, os.X_OK)):
            raise LaunchFileError(location, f"{resolved} is not an executable file; check the path")
    elif shutil.which(program, path=planner.scope.environ.get("PATH", os.defpath)) is None:
        raise LaunchFileError(location, f"command {program!r} is not on PATH; install it or give its full path")


def _prefix(planner: Visitor, body: MarkedMap, location: Location, frame: Frame) -> list[str]:
    if "launch-prefix" not in body:
        return []
    text = planner.sub(body["launch-prefix"], location, frame)
    try:
        return shlex.split(text)
    except ValueError as err:
        raise LaunchFileError(location, f"launch-prefix {text!r}: {err}") from None


def executable(planner: Visitor, body: MarkedMap, location: Location, frame: Frame) -> None:
    common = _process_common(planner, body, location, frame)
    command = planner.split(body["cmd"], location, frame)
    if not command or not command[0]:
        raise LaunchFileError(location, "cmd is empty; give the program to run")
    _check_program(planner, command[0], location)
    command = _prefix(planner, body, location, frame) + command
    base = planner.sub(body["name"], location, frame) if "name" in body else Path(command[0]).name
    planner.processes.append(
        ProcessDescription(label=_label(planner, base), command=tuple(command), location=location, **common)
    )


def node(planner: Visitor, body: MarkedMap, location: Location, frame: Frame) -> None:
    common = _process_common(planner, body, location, frame)
    executable = planner.sub(body["exec"], location, frame)
    package = planner.sub(body["pkg"], location, frame) if "pkg" in body else None
    if package is not None:
        try:
            program = str(planner.find_executable(package, executable))
        except LaunchError as err:
            raise LaunchFileError(location, str(err)) from None
    else:
        program = executable
        _check_program(planner, program, location)
    name = planner.sub(body["name"], location, frame) if "name" in body else None
    if name is not None and not NAME_TOKEN.match(name):
        raise LaunchFileError(
            location, f"invalid node name {name!r}: use letters, digits and '_', not starting with a digit"
        )
    namespace_attr = planner.sub(body["namespace"], location, frame) if "namespace" in body else None
    namespace = make_namespace_absolute(prefix_namespace(planner.configurations.get(ROS_NAMESPACE), namespace_attr))
    if namespace is not None:
        namespace = validate_namespace(namespace, location)
    arguments = planner.split(body["args"], location, frame) if "args" in body else []
    if "ros_args" in body:
        arguments += ["--ros-args", *planner.split(body["ros_args"], location, frame)]
    remaps = [
        (planner.sub(r["from"], location, frame), planner.sub(r["to"], location, frame)) for r in body.get("remap", ())
    ]
    details = NodeDetails(
        package=package or "",
        executable=executable,
        name=name,
        namespace=namespace,
        parameters=_parameters(planner, body.get("param"), location, frame),
        remappings=tuple([*(planner.scope.global_remaps or []), *remaps]),
        global_parameters=tuple(planner.scope.global_params or []),
    )
    command = [*_prefix(planner, body, location, frame), program, *arguments]
    base = planner.sub(body["exec_name"], location, frame) if "exec_name" in body else Path(command[0]).name
    planner.processes.append(
        ProcessDescription(
            label=_label(planner, base), command=tuple(command), location=location, node=details, **common
        )
    )


def _parameters(
    planner: Visitor, entries: MarkedList | None, location: Location, frame: Frame
) -> tuple[InlineParameters | ParameterFile, ...]:
    """One source per `param` entry, in order (launch_ros writes one params file per inline entry)."""
    if not entries:
        return ()
    sources: list[InlineParameters | ParameterFile] = []
    for index, entry in enumerate(entries):
        entry_location = Location(frame.path, entries.item_lines[index], "node param")
        if "from" in entry:
            params_file = _parameter_file(planner, entry, entry_location, frame)
            if params_file is not None:
                sources.append(params_file)
        else:
            sources.append(
                InlineParameters(flatten_parameters(_parameter_tree(planner, [entry], entry_location, frame)))
            )
    return tuple(sources)


def _parameter_tree(planner: Visitor, entries: Sequence[MarkedMap], location: Location, frame: Frame) -> ParameterTree:
    tree: ParameterTree = {}
    for entry in entries:
        name = planner.sub(entry["name"], location, frame)
        if "param" in entry:
            tree[name] = _parameter_tree(planner, entry["param"], location, frame)
            continue

        def evaluate_template(template: Template) -> str:
            try:
                return evaluate(template, planner.context(frame))
            except LaunchError as err:
                raise LaunchFileError(location, str(err)) from None

        try:
            tree[name] = parameter_value(entry["value"], entry.get("type"), evaluate_template)
        except ParameterTypeError as err:
            raise LaunchFileError(location, f"param {name!r}: {err}") from None
    return tree


def _parameter_file(planner: Visitor, entry: MarkedMap, location: Location, frame: Frame) -> ParameterFile | None:
    """The params file of a `from` entry; None (with a warning) where it is not a file and is passed as given.

    launch_ros passes such a file on only when it is a file, and otherwise warns and starts the node
    without it; with `allow_substs` it reads the file first, so a missing one stops the launch.
    """
    file_path = planner.resolve_path(planner.sub(entry["from"], location, frame))
    allow_substs = (
        planner.typed_bool(entry["allow_substs"], location, frame, "allow_substs") if "allow_substs" in entry else False
    )
    if not allow_substs and not file_path.is_file():
        planner.warnings.append(
            f"{location}: Parameter file path is not a file: {file_path}; the node starts without it "
            "(as with ros2 launch): fix the path (try $(find-pkg-share PKG)/config/...)"
        )
        return None
    try:
        text = file_path.read_text()
    except FileNotFoundError:
        raise LaunchFileError(
            location, f"params file {file_path} does not exist; fix the path (try $(find-pkg-share PKG)/config/...)"
        ) from None
    except OSError as err:
        raise LaunchFileError(location, f"params file {file_path} cannot be read: {err.strerror}") from None
    substituted = planner.sub(text, location, frame) if allow_substs else None
    try:
        content = load_yaml(substituted if substituted is not None else text)
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
