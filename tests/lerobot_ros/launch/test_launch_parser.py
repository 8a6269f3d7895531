"""Launch files -> LaunchPlan: arguments, scopes, namespaces, node command lines, parameters, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from lerobot_ros.launch.description import InlineParameters, ParameterFile
from lerobot_ros.launch.errors import LaunchError, LaunchFileError
from lerobot_ros.launch.parser import declared_arguments, parse_cli_arguments


def _only(plan_result):  # type: ignore[no-untyped-def]
    assert len(plan_result.processes) == 1
    return plan_result.processes[0]


def test_node_command_line_matches_launch_ros(write_launch, plan, fake_prefix: Path, tmp_path: Path) -> None:
    path = write_launch(
        """
        launch:
          - node:
              pkg: fakepkg
              exec: fake_node
              name: talker
              namespace: robot1
              args: --verbose "two words"
              ros_args: --log-level debug
              param:
                - {name: rate_hz, value: 5.0}
                - {from: $(find-pkg-share fakepkg)/config/params.yaml}
                - {name: message, value: hi}
              remap:
                - {from: chatter, to: /global_chatter}
        """
    )
    process = _only(plan(path))
    params_dir = tmp_path / "params"
    assert process.label == "fake_node-1"
    assert process.argv(params_dir) == [
        str(fake_prefix / "lib/fakepkg/fake_node"),
        "--verbose",
        "two words",
        "--ros-args",
        "--log-level",
        "debug",
        "--ros-args",
        "-r",
        "__node:=talker",
        "-r",
        "__ns:=/robot1",
        "--params-file",
        str(params_dir / "fake_node-1.params-0.yaml"),
        "--params-file",
        str(fake_prefix / "share/fakepkg/config/params.yaml"),
        "--params-file",
        str(params_dir / "fake_node-1.params-1.yaml"),
        "-r",
        "chatter:=/global_chatter",
    ]
    blocks = [p for p in process.node.parameters if isinstance(p, InlineParameters)]
    assert blocks[0].params_file_content(process.node.params_key) == {
        "/robot1/talker": {"ros__parameters": {"rate_hz": 5.0}}
    }
    assert isinstance(process.node.parameters[1], ParameterFile)


def test_node_without_name_or_namespace_gets_no_ros_remaps_and_wildcard_params(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - node: {pkg: fakepkg, exec: fake_node, param: [{name: a, value: 1}]}
        """
    )
    process = _only(plan(path))
    assert process.argv(Path("/p"))[1:] == ["--ros-args", "--params-file", "/p/fake_node-1.params-0.yaml"]
    assert process.node.params_key == "/**"


def test_parameter_values_are_typed_like_launch_ros(write_launch, plan) -> None:
    """Quoted literals stay strings, only values with $(...) are read as YAML; one params file per entry.

    (Before issue 16 a quoted "true" became a bool here and consecutive entries shared one file; launch_ros
    does neither.)
    """
    path = write_launch(
        """
        launch:
          - arg: {name: rate, default: "7.5"}
          - node:
              pkg: fakepkg
              exec: fake_node
              param:
                - {name: from_arg, value: $(var rate)}
                - {name: as_text, value: $(var rate), type: str}
                - {name: flag, value: "true"}
                - {name: real_flag, value: true}
                - {name: word, value: hello}
                - {name: count, value: 3}
                - {name: list, value: [1, 2, 3]}
                - {name: names, value: ["$(var rate)", b], type: list_of_str}
                - name: nested
                  param:
                    - {name: inner, value: 1}
                    - name: deeper
                      param: [{name: leaf, value: x}]
        """
    )
    blocks = _only(plan(path)).node.parameters
    assert [block.values for block in blocks] == [
        {"from_arg": 7.5},
        {"as_text": "7.5"},
        {"flag": "true"},
        {"real_flag": True},
        {"word": "hello"},
        {"count": 3},
        {"list": [1, 2, 3]},
        {"names": ["7.5", "b"]},
        {"nested.inner": 1, "nested.deeper.leaf": "x"},
    ]


@pytest.mark.parametrize(
    ("param", "expected"),
    [
        ('{name: flag, value: "true", type: bool}', "a quoted literal stays a string in launch_ros"),
        ('{name: rate, value: "60.0", type: float}', "write it unquoted (60.0)"),
        ("{name: rate, value: 5, type: float}", "write 5.0, not 5"),
        ('{name: names, value: [a, b], type: "list[str]"}', "launch_ros spells it list_of_str"),
        ("{name: mixed, value: [1, a]}", "mixed types"),
        ("{name: rate, value: $(var word), type: float}", "'hello' is not a float"),
    ],
)
def test_parameter_values_launch_ros_refuses_are_refused(write_launch, plan, param: str, expected: str) -> None:
    path = write_launch(
        f"launch:\n  - let: {{name: word, value: hello}}\n  - node:\n      pkg: fakepkg\n      exec: fake_node\n"
        f"      param:\n        - {param}\n"
    )
    with pytest.raises(LaunchFileError, match=re.escape(expected)) as excinfo:
        plan(path)
    assert str(excinfo.value).startswith(f"{path}:7: node param: ")


def test_arguments_defaults_command_line_and_let(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - arg: {name: ns, default: default_ns}
          - arg: {name: message, default: "$(var ns) says hi"}
          - let: {name: topic, value: "/$(var ns)/chatter"}
          - node: {pkg: fakepkg, exec: fake_node, namespace: $(var ns), remap: [{from: chatter, to: $(var topic)}]}
        """
    )
    result = plan(path)
    assert result.configurations["message"] == "default_ns says hi"
    assert _only(result).node.remappings == (("chatter", "/default_ns/chatter"),)
    result = plan(path, {"ns": "robot2"})
    assert result.configurations["message"] == "robot2 says hi"
    assert _only(result).node.namespace == "/robot2"


def test_groups_scope_configurations_and_namespaces(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - push-ros-namespace: {namespace: top}
          - group:
              children:
                - push-ros-namespace: {namespace: left}
                - let: {name: side, value: left}
                - node: {pkg: fakepkg, exec: fake_node, name: a}
                - node: {pkg: fakepkg, exec: fake_node, name: b, namespace: arm}
                - node: {pkg: fakepkg, exec: fake_node, name: c, namespace: /absolute}
          - group:
              scoped: false
              children:
                - let: {name: leaked, value: "yes"}
          - group:
              - push_ros_namespace: {namespace: right}
              - node: {pkg: fakepkg, exec: fake_node, name: d}
          - node: {pkg: fakepkg, exec: fake_node, name: e}
        """
    )
    result = plan(path)
    names = [p.node.fully_qualified_name for p in result.processes]
    assert names == ["/top/left/a", "/top/left/arm/b", "/absolute/c", "/top/right/d", "/top/e"]
    assert [p.label for p in result.processes] == [f"fake_node-{i}" for i in range(1, 6)]
    assert "side" not in result.configurations
    assert result.configurations["leaked"] == "yes"
    assert result.configurations["ros_namespace"] == "/top"


def test_conditions(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - arg: {name: with_b, default: "false"}
          - node: {pkg: fakepkg, exec: fake_node, name: a, if: "true"}
          - node: {pkg: fakepkg, exec: fake_node, name: b, if: $(var with_b)}
          - node: {pkg: fakepkg, exec: fake_node, name: c, unless: $(var with_b)}
          - group: {if: $(var with_b), children: [{node: {pkg: fakepkg, exec: fake_node, name: d}}]}
        """
    )
    assert [p.node.name for p in plan(path).processes] == ["a", "c"]
    assert [p.node.name for p in plan(path, {"with_b": "True"}).processes] == ["a", "b", "d"]


def test_include_passes_arguments_and_leaks_configurations(write_launch, plan, tmp_path: Path) -> None:
    write_launch(
        """
        launch:
          - arg: {name: robot}
          - arg: {name: rate, default: "1.0"}
          - let: {name: from_child, value: "$(var robot)"}
          - node: {pkg: fakepkg, exec: fake_node, name: $(var robot), param: [{name: rate, value: $(var rate)}]}
        """,
        "child.launch.yaml",
    )
    path = write_launch(
        """
        launch:
          - include:
              file: $(dirname)/child.launch.yaml
              arg: [{name: robot, value: leader}]
          - group:
              - include: {file: child.launch.yaml, arg: [{name: robot, value: follower}, {name: rate, value: "9"}]}
        """
    )
    result = plan(path)
    assert [p.node.name for p in result.processes] == ["leader", "follower"]
    assert [p.node.parameters[0].values for p in result.processes] == [{"rate": 1.0}, {"rate": 9}]
    assert result.configurations["from_child"] == "leader"  # not scoped, like ros2 launch
    assert [a.name for a in result.arguments] == ["robot", "rate", "robot", "rate"]
    assert result.processes[0].location.path == tmp_path / "child.launch.yaml"


def test_executable_and_process_options(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - executable:
              cmd: sh -c 'echo $0' hello
              name: shout
              output: both
              env: [{name: FOO, value: bar}]
              respawn: "true"
              respawn_delay: 0.5
              respawn_max_retries: 2
              on_exit: shutdown
              sigterm_timeout: 1.0
        """
    )
    process = _only(plan(path))
    assert process.label == "shout-1"
    assert process.command[0] == "sh"  # as launch passes it: looked up on PATH when it starts
    assert process.command[1:] == ("-c", "echo $0", "hello")
    assert process.node is None
    assert dict(process.additional_env) == {"FOO": "bar"}
    assert (process.output, process.respawn, process.respawn_delay, process.respawn_max_retries) == (
        "both",
        True,
        0.5,
        2,
    )
    assert process.required
    assert process.sigterm_timeout == 1.0


def test_declared_arguments_lists_all_args_without_evaluating(write_launch) -> None:
    path = write_launch(
        """
        launch:
          - arg: {name: a, description: first}
          - group: {if: "false", children: [{arg: {name: b, default: "$(var a)"}}]}
          - arg: {name: c, default: x, choice: [{value: x}, {value: y}]}
        """
    )
    arguments = declared_arguments(path)
    assert [(a.name, a.default, a.description, a.choices) for a in arguments] == [
        ("a", None, "first", None),
        ("b", "$(var a)", "", None),
        ("c", "x", "", ("x", "y")),
    ]
    assert [a.location.line for a in arguments] == [2, 3, 4]


def _error(excinfo: pytest.ExceptionInfo[LaunchFileError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("launch:\n  - nod: {pkg: a}\n", 2, "nod: unknown tag 'nod'; lerobot-ros launch supports append_env, arg,"),
        ("launch:\n  - node_container: {pkg: a}\n", 2, "composable nodes are not supported"),
        (
            "launch:\n  - executable: {cmd: ls, args: -l}\n",
            2,
            "launch's executable has no 'args'; put the arguments in 'cmd'",
        ),
        ("launch:\n  - executable: {cmd: ls, respawn_delay: 2}\n", 2, "must be an unquoted float"),
        ("launch:\n  - arg: {name: n, default: 5}\n", 2, "attribute 'default' must be a string"),
        (
            "launch:\n  - group: {scoped: 'false', children: [{let: {name: a, value: b}}]}\n",
            2,
            "unquoted true or false",
        ),
        ("launch:\n  - include: {file: other.launch.py}\n", 2, "Python launch files are not supported"),
        ("launch:\n  - include: {file: other.launch.xml}\n", 2, "XML launch files are not supported"),
        (
            "launch:\n  - node:\n      pkg: fakepkg\n      exec: fake_node\n      colour: red\n",
            5,
            "node: unknown attribute 'colour'",
        ),
        ("launch:\n  - node: {pkg: fakepkg, exec: fake_node, ros_namespace: x}\n", 2, "use 'namespace'"),
        ("launch:\n  - node: {pkg: fakepkg}\n", 2, "node: missing required attribute 'exec'"),
        ("launch:\n  - node: {pkg: nopkg, exec: x}\n", 2, "node: package 'nopkg' is not in the ament index"),
        ("launch:\n  - node: {pkg: fakepkg, exec: nope}\n", 2, "has no executable 'nope' in "),
        (
            "launch:\n  - arg: {name: needed}\n",
            2,
            "argument 'needed' is required (it has no default); pass needed:=VALUE",
        ),
        ("launch:\n\n  - let: {name: x, value: $(optenv X)}\n", 3, "let: unknown substitution $(optenv ...)"),
        ("launch:\n  - let: {name: x, value: $(var  y)}\n", 2, "let: cannot parse '$(var  y)'"),
        ("launch:\n  - node: {exec: fake_node, pkg: fakepkg, output: loud}\n", 2, "output must be one of"),
        (
            "launch:\n  - node:\n      pkg: fakepkg\n      exec: fake_node\n      param:\n        - {name: a}\n",
            6,
            "node param:",
        ),
        ("launch:\n  - include: {file: missing.launch.yaml}\n", 2, "write $(dirname)/missing.launch.yaml"),
        ("launch:\n  - node: {pkg: fakepkg, exec: fake_node, name: 'bad name'}\n", 2, "invalid node name 'bad name'"),
        ("launch:\n  - node: {pkg: fakepkg, exec: fake_node, if: maybe}\n", 2, "'if' must be true/false/1/0"),
        (
            "launch:\n  - node: {pkg: fakepkg, exec: fake_node, on_exit: restart}\n",
            2,
            "on_exit supports only 'shutdown'",
        ),
        ("launch:\n  - node: {pkg: fakepkg, exec: fake_node, param: 3}\n", 2, "must be a list of mappings"),
        ("launch:\n  - node:\n    pkg: x\n", 2, "launch: each list item must be a mapping with exactly one tag"),
        ("launch:\n  - node: {pkg: a, exec: b}\n  - node: {pkg: a, pkg: b}\n", 3, "YAML: duplicate key 'pkg'"),
        ("launch:\n  - node: {pkg: a, exec: b\n  - arg: {}\n", 3, "YAML:"),
        ("nodes: []\n", 1, "launch: a YAML launch file is a mapping with the single key 'launch:'"),
        ("launch:\n  - executable: {cmd: no-such-program-xyz}\n", 2, "command 'no-such-program-xyz' is not on PATH"),
    ],
)
def test_errors_name_file_line_and_tag(write_launch, plan, text: str, line: int, expected: str) -> None:
    path = write_launch(text)
    with pytest.raises(LaunchFileError) as excinfo:
        plan(path)
    message = _error(excinfo)
    assert message.startswith(f"{path}:{line}: ")
    assert expected in message


def test_required_argument_of_an_included_file_must_be_in_the_include_arg_list(
    write_launch, plan, tmp_path: Path
) -> None:
    """As ros2 launch: a required argument given on the command line does not satisfy an include (issue 16)."""
    write_launch("launch:\n  - arg: {name: robot}\n", "child.launch.yaml")
    path = write_launch("launch:\n  - arg: {name: robot}\n  - include: {file: $(dirname)/child.launch.yaml}\n")
    with pytest.raises(LaunchFileError) as excinfo:
        plan(path, {"robot": "given"})
    message = _error(excinfo)
    assert message.startswith(f"{path}:3: include: the included file child.launch.yaml requires argument 'robot'")
    assert "add {name: robot, value: ...} to this include's 'arg' list" in message
    passing = write_launch(
        "launch:\n  - include: {file: $(dirname)/child.launch.yaml, arg: [{name: robot, value: x}]}\n", "ok.launch.yaml"
    )
    assert plan(passing).configurations["robot"] == "x"


def test_include_cycle_is_an_error(write_launch, plan) -> None:
    path = write_launch("launch:\n  - include: {file: $(dirname)/test.launch.yaml}\n")
    with pytest.raises(LaunchFileError, match="include cycle"):
        plan(path)


def test_params_file_must_have_ros_parameters(write_launch, plan, tmp_path: Path) -> None:
    (tmp_path / "flat.yaml").write_text("rate_hz: 5.0\n")
    path = write_launch(
        "launch:\n  - node:\n      pkg: fakepkg\n      exec: fake_node\n      param: [{from: flat.yaml}]\n"
    )
    with pytest.raises(LaunchFileError, match="is not a ROS 2 params file") as excinfo:
        plan(path)
    assert str(excinfo.value).startswith(f"{path}:5: node param: ")
    (tmp_path / "flat.yaml").write_text(yaml.safe_dump({"/ns": {"talker": {"ros__parameters": {"a": 1}}}}))
    assert plan(path).processes[0].node.parameters == (ParameterFile(tmp_path / "flat.yaml"),)


def test_unknown_and_malformed_command_line_arguments(write_launch, plan) -> None:
    path = write_launch("launch:\n  - arg: {name: ns, default: a}\n")
    with pytest.raises(LaunchFileError, match=r"'nss' is not declared .*\(declared: ns\)"):
        plan(path, {"nss": "x"})
    with pytest.raises(LaunchFileError, match="is not NAME:=VALUE"):
        parse_cli_arguments(["ns=x"], path)
    assert parse_cli_arguments(["ns:=a:=b", "empty:="], path) == {"ns": "a:=b", "empty": ""}


def test_choices_are_enforced(write_launch, plan) -> None:
    path = write_launch("launch:\n  - arg: {name: mode, default: sim, choice: [{value: sim}, {value: real}]}\n")
    assert plan(path).configurations["mode"] == "sim"
    with pytest.raises(LaunchFileError, match="not one of sim, real"):
        plan(path, {"mode": "other"})


def test_missing_launch_file(plan, tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="no such launch file"):
        plan(tmp_path / "nope.launch.yaml")


def test_set_env_and_unset_env_are_scoped_by_groups(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - set_env: {name: MODE, value: sim}
          - group:
              - set_env: {name: MODE, value: real}
              - unset_env: {name: HOME_DIR}
              - node: {pkg: fakepkg, exec: fake_node, name: a, env: [{name: EXTRA, value: $(env MODE)}]}
          - node: {pkg: fakepkg, exec: fake_node, name: b, args: $(env MODE) $(env HOME_DIR)}
        """
    )
    a, b = plan(path, environ={"HOME_DIR": "/home/me"}).processes
    assert dict(a.additional_env) == {"MODE": "real", "EXTRA": "real"}
    assert a.unset_env == ("HOME_DIR",)
    assert dict(b.additional_env) == {"MODE": "sim"}
    assert b.unset_env == ()
    assert b.command[1:] == ("sim", "/home/me")


def test_declared_arguments_follow_includes_when_their_path_resolves(write_launch, index, tmp_path: Path) -> None:
    write_launch(
        "launch:\n  - arg: {name: robot}\n  - arg: {name: rate, default: '1', description: child rate}\n",
        "child.launch.yaml",
    )
    path = write_launch(
        """
        launch:
          - arg: {name: child, default: child}
          - include: {file: "$(dirname)/$(var child).launch.yaml", arg: [{name: robot, value: x}]}
          - include: {file: "$(var undefined)/other.launch.yaml"}
        """
    )
    arguments = declared_arguments(path, package_share=index.package_share, package_prefix=index.package_prefix)
    assert [(a.name, a.location.path.name) for a in arguments] == [
        ("child", "test.launch.yaml"),
        ("rate", "child.launch.yaml"),
    ]
    assert [a.name for a in declared_arguments(path)] == ["child"]  # without a package index: this file only


def test_for_and_for_each_repeat_their_actions(write_launch, plan) -> None:
    """launch 3.8's loops (not in the oracle's 3.7 sources: checked against the launch 3.8 semantics)."""
    path = write_launch(
        """
        launch:
          - arg: {name: count, default: "3"}
          - for:
              len: $(var count)
              name: i
              children:
                - node: {pkg: fakepkg, exec: fake_node, name: arm_$(index i), namespace: robot$(index i)}
          - for_each:
              values: "{name: left, id: 1};{name: right}"
              children:
                - node: {pkg: fakepkg, exec: fake_node, name: $(for-var name), args: $(for-var id 0)}
        """
    )
    processes = plan(path).processes
    assert [p.node.fully_qualified_name for p in processes] == [
        "/robot0/arm_0",
        "/robot1/arm_1",
        "/robot2/arm_2",
        "/left",
        "/right",
    ]
    assert [p.command[1] for p in processes[3:]] == ["1", "0"]
    with pytest.raises(LaunchFileError, match="len must be an integer"):
        plan(path, {"count": "many"})


def test_timer_actions_start_later_with_the_configurations_at_that_time(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - let: {name: a, value: first}
          - timer: {period: 1.5, children: [{node: {pkg: fakepkg, exec: fake_node, args: $(var a)}}]}
          - let: {name: a, value: second}
          - node: {pkg: fakepkg, exec: fake_node, args: now}
          - timer: {period: 0.5, children: [{log: {message: early}}]}
        """
    )
    result = plan(path)
    assert [(p.label, p.command[1], p.start_delay) for p in result.processes] == [
        ("fake_node-1", "now", 0.0),
        ("fake_node-2", "second", 1.5),
    ]
    assert [(m.text, m.delay) for m in result.messages] == [("early", 0.5)]


def test_python_and_xml_launch_files_are_refused_naming_the_format(plan, tmp_path: Path) -> None:
    for suffix, name in ((".py", "Python"), (".xml", "XML")):
        path = tmp_path / f"stack.launch{suffix}"
        path.write_text("")
        with pytest.raises(LaunchError, match=f"{name} launch files are not supported") as excinfo:
            plan(path)
        assert "\n" not in str(excinfo.value)
        assert str(excinfo.value).startswith(f"{path}:1: launch: ")


def test_set_parameter_and_set_remap_apply_to_the_nodes_after_them(write_launch, plan) -> None:
    path = write_launch(
        """
        launch:
          - node: {pkg: fakepkg, exec: fake_node, name: before}
          - set_parameter: {name: use_sim_time, value: "true"}
          - set_remap: {from: /clock, to: /sim/clock}
          - node: {pkg: fakepkg, exec: fake_node, name: after, remap: [{from: a, to: b}]}
        """
    )
    before, after = plan(path).processes
    assert (before.node.global_parameters, before.node.remappings) == ((), ())
    assert after.node.global_parameters == ("use_sim_time:=True",)
    assert after.node.remappings == (("/clock", "/sim/clock"), ("a", "b"))
    assert after.argv(Path("/p"))[2:6] == ["-r", "__node:=after", "-p", "use_sim_time:=True"]


def test_every_tag_has_one_handler() -> None:
    """The tags the first pass accepts are exactly those the planner has a handler for."""
    from lerobot_ros.launch.entities import SCHEMAS
    from lerobot_ros.launch.parser import Planner

    assert set(Planner.HANDLERS) == set(SCHEMAS)
    assert set(SCHEMAS) >= Planner.SURVEYED


def test_a_file_including_itself_by_absolute_path(write_launch, plan, tmp_path: Path) -> None:
    """The search for an include's required arguments follows absolute paths; a self-include must not loop it.

    Before the survey shared the planner, it recursed until RecursionError (a traceback, not a one-line error).
    """
    path = tmp_path / "test.launch.yaml"
    write_launch(
        f"""
        launch:
          - arg: {{name: again, default: "false"}}
          - include: {{file: {path}, if: $(var again)}}
        """
    )
    assert [a.name for a in plan(path).arguments] == ["again"]
    with pytest.raises(LaunchFileError, match=r"test\.launch\.yaml:3: include: include cycle"):
        plan(path, {"again": "true"})


def test_declared_arguments_read_args_and_includes_as_the_run_does(write_launch, index, plan) -> None:
    """Description and choices are escaped as launch's `arg` parse does; an include is followed with the
    configurations the run would have there (a scoped group's default is gone, argument names substituted)."""
    write_launch("launch:\n  - arg: {name: robot}\n  - arg: {name: rate, default: '1'}\n", "child.launch.yaml")
    write_launch("launch:\n  - arg: {name: unreachable, default: '1'}\n", "other.launch.yaml")
    path = write_launch(
        r"""
        launch:
          - arg: {name: mode, default: a, description: 'one \\ two', choice: [{value: a}, {value: 'b\\c'}]}
          - group: [{arg: {name: where, default: $(dirname)}}]
          - include: {file: "$(var where)/other.launch.yaml"}
          - arg: {name: which, default: robot}
          - include: {file: "$(dirname)/child.launch.yaml", arg: [{name: $(var which), value: r}]}
        """
    )
    arguments = declared_arguments(path, package_share=index.package_share, package_prefix=index.package_prefix)
    assert [(a.name, a.location.path.name) for a in arguments] == [
        ("mode", "test.launch.yaml"),
        ("where", "test.launch.yaml"),
        ("which", "test.launch.yaml"),
        ("rate", "child.launch.yaml"),
    ]
    assert (arguments[0].description, arguments[0].choices) == ("one \\ two", ("a", "b\\c"))
    ran = plan(path, {"where": str(path.parent)}).arguments
    assert (ran[0].description, ran[0].choices) == (arguments[0].description, arguments[0].choices)
