"""A launch plan as plain JSON data: what `lerobot-ros launch --print-json` prints.

The same format is produced from the real launch_ros by `tests/lerobot_ros/launch/real_launch_resolve.py`,
so the two launchers' resolutions of one file compare with `==`: per process its label, kind, the
command line (generated params files as `<inline-params-N>`), node package/executable/name/namespace,
parameter sources with typed values (nested names flattened with '.'), remappings, the environment
changes against the launcher's environment, cwd, output and the process options.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lerobot_ros.bounded_yaml import load_yaml
from lerobot_ros.launch.description import InlineParameters, LaunchPlan, ProcessDescription
from lerobot_ros.launch.parameters import flatten_parameters

_PLACEHOLDER_DIR = Path("/<generated>")
DEFAULT_SIGTERM_TIMEOUT = 5.0
DEFAULT_SIGKILL_TIMEOUT = 5.0


def typed(value: Any) -> Any:
    """`{"type": "int", "value": 5}`; lists item by item (so 5 and 5.0 and "5" all differ)."""
    if isinstance(value, (list, tuple)):
        return [typed(v) for v in value]
    return {"type": type(value).__name__, "value": value}


def generated_params(content: Mapping[str, Any]) -> dict[str, Any]:
    """A generated params file's content: node key -> flattened typed parameters."""
    return {
        str(key): {k: typed(v) for k, v in flatten_parameters(body["ros__parameters"]).items()}
        for key, body in content.items()
    }


def _process(process: ProcessDescription, base_env: Mapping[str, str]) -> dict[str, Any]:
    record: dict[str, Any] = {"label": process.label}
    argv = process.argv(_PLACEHOLDER_DIR)
    generated = [str(path) for path, _ in process.inline_params_files(_PLACEHOLDER_DIR)]
    argv = [f"<inline-params-{generated.index(a)}>" if a in generated else a for a in argv]
    if process.node is not None:
        node = process.node
        parameters: list[dict[str, Any]] = []
        for source in node.parameters:
            if isinstance(source, InlineParameters):
                content = source.params_file_content(node.params_key)
            elif source.substituted is not None:
                content = load_yaml(source.substituted)
            else:
                parameters.append({"file": str(source.path)})
                continue
            parameters.append({"generated": generated_params(content)})
        record.update(
            kind="node",
            package=node.package or None,
            executable=node.executable,
            name=node.name,
            namespace=node.namespace,
            parameters=parameters,
            remappings=[list(r) for r in node.remappings],
        )
    else:
        record["kind"] = "executable"
    env = {k: v for k, v in base_env.items() if k not in process.unset_env}
    env.update(process.additional_env)
    record.update(
        cmd=argv,
        cwd=None if process.cwd is None else str(process.cwd),
        env_set={k: v for k, v in sorted(env.items()) if base_env.get(k) != v},
        env_unset=sorted(k for k in base_env if k not in env),
        output=process.output,
        respawn=process.respawn,
        respawn_delay=float(process.respawn_delay or 0.0),
        respawn_max_retries=process.respawn_max_retries,
        required=process.required,
        emulate_tty=process.emulate_tty,
        sigterm_timeout=process.sigterm_timeout if process.sigterm_timeout is not None else DEFAULT_SIGTERM_TIMEOUT,
        sigkill_timeout=process.sigkill_timeout if process.sigkill_timeout is not None else DEFAULT_SIGKILL_TIMEOUT,
    )
    return record


def resolve_to_json(plan: LaunchPlan, base_env: Mapping[str, str]) -> dict[str, Any]:
    """`{"ok": true, "processes": [...]}` in start order (processes inside timers last, by delay)."""
    ordered = sorted(plan.processes, key=lambda p: p.start_delay)
    return {"ok": True, "processes": [_process(p, base_env) for p in ordered]}
