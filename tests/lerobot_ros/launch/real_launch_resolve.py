"""Resolve a YAML launch file with the real ROS 2 launch/launch_ros (the oracle), starting nothing.

Run with the project's interpreter and the oracle's install dir on PYTHONPATH:

    PYTHONPATH=<real-launch> .venv/bin/python real_launch_resolve.py FILE [name:=value ...]

It runs the file the way `ros2 launch FILE name:=value` does (an `IncludeLaunchDescription` with the
command-line arguments in a `LaunchService`), with `ExecuteLocal.execute` replaced by a recorder:
each process is prepared (every substitution performed) and described, never started. It prints
one JSON object: `{"ok": true, "processes": [...]}` or `{"ok": false, "error": "..."}`, in the format
of `lerobot_ros.launch.resolved` so the two launchers' results compare with `==`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import launch.descriptions.executable as executable_description
import launch.logging
import yaml
from launch.actions.execute_local import ExecuteLocal
from launch.launch_description_sources import AnyLaunchDescriptionSource
from launch_ros.actions import Node

import launch
from lerobot_ros.launch.resolved import generated_params

BASE_ENV = dict(os.environ)
RECORDS: list[dict[str, Any]] = []


def _describe(action: ExecuteLocal, context: Any) -> dict[str, Any]:
    description = action._ExecuteLocal__process_description
    cmd = list(description.final_cmd)
    record: dict[str, Any] = {"label": description.final_name}
    parameters: list[dict[str, Any]] = []
    if isinstance(action, Node):
        inline_files = []
        for argument, is_file in action._Node__expanded_parameter_arguments or []:
            if not is_file:
                parameters.append({"rule": argument})
                continue
            if os.path.basename(argument).startswith("launch_params_"):
                with open(argument) as handle:
                    parameters.append({"generated": generated_params(yaml.safe_load(handle))})
                # launch_ros writes it with delete=False for the process it would start; nothing starts here.
                os.unlink(argument)
                inline_files.append(argument)
            else:
                parameters.append({"file": argument})
        name = action._Node__expanded_node_name
        namespace = action._Node__expanded_node_namespace
        cmd = [f"<inline-params-{inline_files.index(a)}>" if a in inline_files else a for a in cmd]
        record.update(
            kind="node",
            package=launch.utilities.perform_substitutions(context, action.node_package)
            if action.node_package
            else None,
            executable=launch.utilities.perform_substitutions(context, action.node_executable),
            name=None if name == Node.UNSPECIFIED_NODE_NAME else name,
            namespace=None if namespace == Node.UNSPECIFIED_NODE_NAMESPACE else namespace,
            parameters=parameters,
            remappings=[list(r) for r in action._Node__expanded_remappings or []],
        )
    else:
        record["kind"] = "executable"
    env = description.final_env or {}
    record["cmd"] = cmd
    record["cwd"] = description.final_cwd
    record["env_set"] = {k: v for k, v in sorted(env.items()) if BASE_ENV.get(k) != v}
    record["env_unset"] = sorted(k for k in BASE_ENV if k not in env)
    output = action._ExecuteLocal__output
    record["output"] = launch.utilities.perform_substitutions(context, output) if isinstance(output, list) else output
    record["respawn"] = bool(action._ExecuteLocal__respawn)
    record["respawn_delay"] = float(action._ExecuteLocal__respawn_delay or 0.0)
    record["respawn_max_retries"] = action._ExecuteLocal__respawn_max_retries
    record["required"] = bool(action._ExecuteLocal__on_exit)
    record["emulate_tty"] = bool(action._ExecuteLocal__emulate_tty)
    for attribute in ("sigterm_timeout", "sigkill_timeout"):
        subs = getattr(action, f"_ExecuteLocal__{attribute}")
        record[attribute] = float(launch.utilities.perform_substitutions(context, subs))
    return record


def _record(self: ExecuteLocal, context: Any) -> None:
    self.prepare(context)
    RECORDS.append(_describe(self, context))


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def resolve(path: str, arguments: list[str]) -> dict[str, Any]:
    """One launch file, as `ros2 launch path arguments...` would run it, with processes recorded."""
    RECORDS.clear()
    executable_description._executable_process_counter = 0
    errors = _Errors()
    logger = logging.getLogger("launch")
    logger.addHandler(errors)
    launch_arguments = [tuple(a.split(":=", 1)) for a in arguments]
    service = launch.LaunchService(argv=arguments)
    service.include_launch_description(
        launch.LaunchDescription(
            [
                launch.actions.IncludeLaunchDescription(
                    AnyLaunchDescriptionSource(os.path.abspath(path)), launch_arguments=launch_arguments
                )
            ]
        )
    )
    try:
        code = service.run(shutdown_when_idle=True)
    except Exception as err:
        errors.messages.append(f"{type(err).__name__}: {err}")
        code = 1
    finally:
        logger.removeHandler(errors)
        os.environ.clear()  # launch's set_env/unset_env change os.environ itself
        os.environ.update(BASE_ENV)
    if code != 0 or errors.messages:
        return {"ok": False, "error": " | ".join(errors.messages) or f"exit code {code}"}
    return {"ok": True, "processes": list(RECORDS)}


def main(argv: list[str]) -> int:
    """`FILE [name:=value ...]`: one result; `--batch`: a JSON list of [file, [arguments], cwd] on stdin."""
    ExecuteLocal.execute = _record
    if argv == ["--batch"]:
        results = []
        for path, arguments, cwd in json.load(sys.stdin):
            os.chdir(cwd)
            results.append(resolve(path, arguments))
        print(json.dumps(results, default=str))
    else:
        print(json.dumps(resolve(argv[0], argv[1:]), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
