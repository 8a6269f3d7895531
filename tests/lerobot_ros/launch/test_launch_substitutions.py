"""`$(...)` substitutions: parsing, evaluation, errors, command-line splitting."""

from __future__ import annotations

from pathlib import Path

import pytest

from lerobot_ros.launch.errors import PackageNotFoundError, SubstitutionError
from lerobot_ros.launch.substitutions import (
    Substitution,
    SubstitutionContext,
    parse_template,
    split_command_line,
    substitute,
)


def _share(package: str) -> Path:
    if package != "pkg":
        raise PackageNotFoundError(f"package {package!r} not found")
    return Path("/opt/prefix/share/pkg")


CONTEXT = SubstitutionContext(
    configurations={"ns": "robot1", "name": "ns", "spaced": "a b", "spaced_flag": "True"},
    environ={"HOME_DIR": "/home/me", "PATH": "/usr/bin:/bin"},
    launch_file=Path("/work/launch/main.launch.yaml"),
    package_share=_share,
    package_prefix=lambda package: _share(package).parent.parent,
)


def test_plain_text_is_one_fragment() -> None:
    assert parse_template("just text") == ("just text",)


def test_nested_substitution_is_parsed_as_a_tree() -> None:
    inner = Substitution("var", (("name",),))
    assert parse_template("x$(var $(var name))") == ("x", Substitution("var", ((inner,),)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/$(var ns)/chatter", "/robot1/chatter"),
        ("$(var $(var name))", "robot1"),
        ("$(env HOME_DIR)/x", "/home/me/x"),
        ("$(env MISSING fallback)", "fallback"),
        ("$(env MISSING 'two words')", "two words"),
        ("$(env MISSING '')", ""),
        ("$(var nope fallback)", "fallback"),
        ("$(var ns fallback)", "robot1"),
        ("$(not true) $(not 0) $(and true 1) $(or false no)", "false true true false"),
        ("$(any false 0 yes) $(all true 1 off) $(any) $(all)", "true false false true"),
        ("$(equals 2 2.0) $(equals TRUE 1) $(equals a b) $(not-equals a b)", "true true false true"),
        ("$(if $(var spaced_flag) yes no)|$(if false yes)", "yes|"),
        ("$(eval '2 * 3') $(eval 'floor(2.7)' math) $(eval '\"$(var ns)\".upper()')", "6 2 ROBOT1"),
        ("$(command 'echo hi')", "hi\n"),
        ("$(find-exec sh)", "/usr/bin/sh"),
        ("\\$(var ns) a\\b \\\\", "$(var ns) ab \\"),
        ("$(env MISSING a\\)b)", "a)b"),
        ("$(find-pkg-share pkg)/config/p.yaml", "/opt/prefix/share/pkg/config/p.yaml"),
        ("$(find-pkg-prefix pkg)", "/opt/prefix"),
        ("$(dirname)/other.launch.yaml", "/work/launch/other.launch.yaml"),
        ("$(filename)", "/work/launch/main.launch.yaml"),
        ("cost: 5$", "cost: 5$"),
    ],
)
def test_substitute(text: str, expected: str) -> None:
    assert substitute(text, CONTEXT) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("$(var nope)", "no launch argument or let named 'nope'"),
        ("$(env MISSING)", "environment variable MISSING is not set"),
        ("$(eval 1 + 2)", "$(eval) takes 1 to 2 argument(s), got 3"),
        ("$(eval '1/0')", "ZeroDivisionError"),
        ("$(command false)", "$(command false) exited with 1"),
        ("$(command 'sh -c \"echo x >&2\"')", "wrote to stderr"),
        ("$(optenv HOME)", "launch_ros has no $(optenv); write $(env NAME '')"),
        ("$(param x)", "not supported"),
        ("$(colour red)", "unknown substitution $(colour ...)"),
        ("$(var ns", "is not closed"),
        ("$(var 'ns)", "quote ' is not closed"),
        ("$(var  ns)", "expected an argument"),  # launch's grammar: one space between arguments
        ("$(var ns )", "expected an argument"),
        ("$(var a'b')", "unexpected"),
        ("$()", "expected a substitution name"),
        ("$(dirname extra)", "$(dirname) takes 0 argument(s), got 1"),
        ("$(var a b c)", "$(var) takes 1 to 2 argument(s), got 3"),
        ("$(not maybe)", "'maybe' is not a boolean"),
        ("$(index i)", "not inside a 'for' loop named 'i'"),
        ("$(find-pkg-share other)", "package 'other' not found"),
    ],
)
def test_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises((SubstitutionError, PackageNotFoundError)) as info:
        substitute(text, CONTEXT)
    assert message in str(info.value)


def test_split_keeps_substituted_values_whole() -> None:
    assert split_command_line("--name $(var spaced) --ns=$(var ns) 'quoted arg'", CONTEXT) == [
        "--name",
        "a b",
        "--ns=robot1",
        "quoted arg",
    ]


def test_split_joins_text_glued_to_a_substitution() -> None:
    assert split_command_line("$(find-pkg-share pkg)/cfg.yaml x", CONTEXT) == ["/opt/prefix/share/pkg/cfg.yaml", "x"]
    assert split_command_line("a $(var ns) b", CONTEXT) == ["a", "robot1", "b"]
    assert split_command_line("pre$(var ns)post", CONTEXT) == ["prerobot1post"]


def test_split_rejects_unbalanced_quotes() -> None:
    with pytest.raises(SubstitutionError, match="check its quotes"):
        split_command_line("echo 'oops", CONTEXT)


def test_anon_gives_one_name_per_id_for_the_whole_launch() -> None:
    configurations: dict[str, str] = {}
    context = SubstitutionContext(configurations, {}, Path("/f.launch.yaml"), _share, _share)
    first, again, other = (substitute(f"$(anon {n})", context) for n in ("talker", "talker", "listener"))
    assert first == again != other
    assert first.startswith("talker_") and all(c not in first for c in ".-:")


def test_exec_in_pkg_finds_the_executable_under_lib(tmp_path: Path) -> None:
    lib = tmp_path / "lib" / "pkg"
    lib.mkdir(parents=True)
    (lib / "node").write_text("#!/bin/sh\n")
    (lib / "node").chmod(0o755)
    context = SubstitutionContext({}, {}, Path("/f.launch.yaml"), _share, lambda package: tmp_path)
    assert substitute("$(exec-in-pkg node pkg)", context) == str(lib / "node")
    with pytest.raises(SubstitutionError, match="no executable 'other'"):
        substitute("$(exec-in-pkg other pkg)", context)


def test_file_content_reads_relative_to_the_launcher_directory(tmp_path: Path) -> None:
    (tmp_path / "robot.urdf").write_text("<robot/>")
    context = SubstitutionContext({}, {}, Path("/f.launch.yaml"), _share, _share, cwd=tmp_path)
    assert substitute("$(file-content robot.urdf)", context) == "<robot/>"
    with pytest.raises(SubstitutionError, match="file not found"):
        substitute("$(file-content missing.urdf)", context)


def test_loop_substitutions() -> None:
    context = SubstitutionContext(
        {}, {}, Path("/f.launch.yaml"), _share, _share, loop_indices={"i": 2}, loop_values={"name": "a"}
    )
    assert substitute("$(index i) $(for-var name) $(for-var id 7)", context) == "2 a 7"
