"""`lerobot-ros launch`: run a ROS 2 YAML launch file (the `ros2 launch` format) without ros2 launch.

    lerobot-ros launch FILE.launch.yaml [name:=value ...]
    lerobot-ros launch PACKAGE FILE.launch.yaml [name:=value ...]   (FILE found under share/PACKAGE)
    lerobot-ros launch --print FILE [name:=value ...]                 (resolved processes, starts nothing)
    lerobot-ros launch --print-json FILE [name:=value ...]            (the same as JSON)
    lerobot-ros launch --show-args FILE                               (declared arguments)

The YAML frontend of launch/launch_ros: tags arg, let, node, executable, include, group,
push-ros-namespace, set_env, append_env, unset_env, set_parameter, set_remap, log, shutdown, timer,
for, for_each; substitutions $(var), $(env), $(find-pkg-share), $(find-pkg-prefix), $(exec-in-pkg),
$(find-exec), $(dirname), $(filename), $(anon), $(eval), $(command), $(file-content), $(not),
$(and), $(or), $(any), $(all), $(equals), $(not-equals), $(if), $(index), $(for-var).
Ctrl-C stops every process (SIGINT, then SIGTERM, then SIGKILL); the exit status is 1 when a
required process (on_exit: shutdown) failed, 2 for an error in the launch file or arguments.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from lerobot_ros.command import Command, CommandError

if TYPE_CHECKING:
    from lerobot_ros.launch.description import DeclaredArgument, LaunchPlan, ProcessDescription
    from lerobot_ros.launch.packages import PackageIndex

PRINT_PARAMS_DIR = Path("<log-dir>/params")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="FILE|PACKAGE", help="launch file, or a package whose share/ holds FILE")
    parser.add_argument(
        "arguments",
        nargs="*",
        metavar="[FILE] name:=value",
        help="launch arguments (after FILE when a PACKAGE is given)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "-p", "--print", dest="print_plan", action="store_true", help="print the resolved processes and exit"
    )
    mode.add_argument(
        "--print-json",
        action="store_true",
        help="print the resolved processes as JSON (the format of lerobot_ros.launch.resolved) and exit",
    )
    mode.add_argument("-s", "--show-args", action="store_true", help="list the file's arguments and exit")
    parser.add_argument(
        "--sigterm-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds after SIGINT before SIGTERM (default 5)",
    )
    parser.add_argument(
        "--sigkill-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds after SIGTERM before SIGKILL (default 5)",
    )
    parser.add_argument(
        "--dds-profile",
        choices=["shm", "multihost"],
        default=None,
        help="Fast DDS profile of the launched processes: shm (one host, default, or $LEROBOT_ROS_DDS) or "
        "multihost (the stack split over hosts)",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        metavar="DIR",
        help="where process logs and generated params files go (default ~/.ros/log/...)",
    )


def _locate(target: str, arguments: list[str], index: PackageIndex) -> tuple[Path, list[str]]:
    from lerobot_ros.launch.errors import LaunchError

    path = Path(target)
    if path.is_file():
        return path, arguments
    if arguments and ":=" not in arguments[0]:
        name = arguments[0]
        try:
            share = index.package_share(target)
        except LaunchError as err:
            raise CommandError(f"{target}: not a launch file, and {err}") from None
        # share/<pkg>/launch is often a symlink (symlink installs), so walk following links.
        matches = sorted(Path(d) / name for d, _, files in os.walk(share, followlinks=True) if name in files)
        if not matches:
            raise CommandError(f"{name}: no such launch file under {share}; reinstall {target} after adding it")
        return matches[0], arguments[1:]
    raise CommandError(f"{target}: no such launch file; check the path, or give PACKAGE FILE to use an installed one")


def default_log_dir(environ: os._Environ[str] | dict[str, str]) -> Path:
    """`$ROS_LOG_DIR` or `$ROS_HOME/log` or `~/.ros/log`, plus a per-run directory like ros2 launch's."""
    if environ.get("ROS_LOG_DIR"):
        base = Path(environ["ROS_LOG_DIR"])
    elif environ.get("ROS_HOME"):
        base = Path(environ["ROS_HOME"]) / "log"
    else:
        base = Path.home() / ".ros" / "log"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H-%M-%S-%f")
    return base.expanduser() / f"{stamp}-{socket.gethostname()}-{os.getpid()}"


def format_arguments(arguments: list[DeclaredArgument], launch_file: Path, out: TextIO) -> None:
    """`--show-args`: one block per declared argument, like `ros2 launch --show-args`."""
    if not arguments:
        out.write("This launch file declares no arguments.\n")
        return
    out.write("Arguments (pass arguments as '<name>:=<value>'):\n")
    for argument in arguments:
        out.write(f"\n    '{argument.name}':\n")
        out.write(f"        {argument.description or 'no description given'}\n")
        if argument.location.path != launch_file:
            out.write(f"        (declared in {argument.location.path})\n")
        if argument.choices:
            out.write(f"        Valid choices are: {', '.join(argument.choices)}\n")
        if argument.default is None:
            out.write("        (required)\n")
        else:
            out.write(f"        (default: '{argument.default}')\n")


def _describe(process: ProcessDescription) -> list[str]:
    import yaml

    from lerobot_ros.launch.description import InlineParameters

    lines: list[str] = []
    source = f"{process.location.path.name}:{process.location.line}"
    if process.node is not None:
        node = process.node
        name = node.fully_qualified_name or f"{(node.namespace or '/').rstrip('/')}/<default name>"
        package = f"{node.package}/{node.executable}" if node.package else node.executable
        lines.append(f"{process.label}: node {name} ({package}) from {source}")
        lines.append(f"  namespace: {node.namespace or '/ (not set)'}")
    else:
        lines.append(f"{process.label}: executable from {source}")
    lines.append(f"  cmd: {shlex.join(process.argv(PRINT_PARAMS_DIR))}")
    if process.node is not None:
        inline = dict(process.inline_params_files(PRINT_PARAMS_DIR))
        for path, block in inline.items():
            if isinstance(block, InlineParameters):
                content = yaml.safe_dump(block.params_file_content(process.node.params_key), sort_keys=False)
                lines.append(f"  params ({path.name}):")
            else:
                content = block.substituted or ""
                lines.append(f"  params ({path.name}, {block.path} with substitutions):")
            lines += [f"    {line}" for line in content.rstrip().splitlines()]
        for params in process.node.parameters:
            if not isinstance(params, InlineParameters) and params.substituted is None:
                lines.append(f"  params file: {params.path}")
        for source_name, target in process.node.remappings:
            lines.append(f"  remap: {source_name} -> {target}")
    for key, value in process.additional_env.items():
        lines.append(f"  env: {key}={value}")
    if process.unset_env:
        lines.append(f"  unset env: {' '.join(process.unset_env)}")
    if process.cwd is not None:
        lines.append(f"  cwd: {process.cwd}")
    flags = [f"output: {process.output}"]
    if process.start_delay:
        flags.append(f"starts after {process.start_delay:g} s (timer)")
    if process.emulate_tty:
        flags.append("emulate_tty")
    if process.respawn:
        retries = "unlimited" if process.respawn_max_retries < 0 else str(process.respawn_max_retries)
        flags.append(f"respawn: after {process.respawn_delay:g} s, {retries} times")
    if process.required:
        flags.append("on_exit: shutdown")
    lines.append("  " + ", ".join(flags))
    return lines


def format_plan(plan: LaunchPlan, out: TextIO) -> None:
    """`--print`: the resolved processes, in start order."""
    out.write(f"# {plan.launch_file}: {len(plan.processes)} process(es)\n")
    for key in sorted(plan.configurations):
        out.write(f"# {key} = {plan.configurations[key]!r}\n")
    for process in plan.processes:
        out.write("\n" + "\n".join(_describe(process)) + "\n")
    for warning in plan.warnings:
        out.write(f"\nwarning: {warning}\n")
    for message in plan.messages:
        out.write(f"\nlog after {message.delay:g} s: {message.text}\n")
    if plan.shutdown is not None:
        out.write(f"\nshutdown after {plan.shutdown.delay:g} s: {plan.shutdown.reason}\n")


def _run(args: argparse.Namespace) -> int:
    from lerobot_ros import dds
    from lerobot_ros.launch.errors import LaunchError
    from lerobot_ros.launch.packages import PackageIndex
    from lerobot_ros.launch.parser import declared_arguments, parse_cli_arguments, plan_launch
    from lerobot_ros.launch.supervisor import ProcessSupervisor

    index = PackageIndex()
    launch_file, arguments = _locate(args.target, list(args.arguments), index)
    try:
        if args.show_args:
            arguments_found = declared_arguments(
                launch_file, package_share=index.package_share, package_prefix=index.package_prefix
            )
            format_arguments(arguments_found, launch_file.resolve(), sys.stdout)
            return 0
        plan = plan_launch(
            launch_file,
            parse_cli_arguments(arguments, launch_file),
            package_share=index.package_share,
            package_prefix=index.package_prefix,
            find_executable=index.executable,
        )
    except LaunchError as err:
        raise CommandError(str(err)) from None
    if args.print_plan:
        format_plan(plan, sys.stdout)
        return 0
    for warning in plan.warnings:
        print(f"[WARNING] [launch]: {warning}", file=sys.stderr)
    if args.print_json:
        import json

        from lerobot_ros.launch.resolved import resolve_to_json

        json.dump(resolve_to_json(plan, os.environ), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    try:
        env = dds.ros_environment(os.environ, profile=args.dds_profile)
    except dds.DdsProfileError as err:
        raise CommandError(str(err)) from None
    dds.clean_stale_shm()
    supervisor = ProcessSupervisor(
        plan.processes,
        base_env=env,
        log_dir=args.log_dir or default_log_dir(os.environ),
        out=sys.stdout,
        sigterm_timeout=args.sigterm_timeout,
        sigkill_timeout=args.sigkill_timeout,
        messages=plan.messages,
        shutdown_request=plan.shutdown,
    )
    return supervisor.run()


COMMAND = Command(
    name="launch",
    help="run a ROS 2 YAML launch file (the launch_ros YAML frontend, without ros2 launch)",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
