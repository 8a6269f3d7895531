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
    configurations={"ns": "robot1", "name": "ns", "spaced": "a b"},
    environ={"HOME_DIR": "/home/me"},
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
        ("$(optenv MISSING)", ""),
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
        ("$(eval 1 + 2)", "unsupported substitution $(eval"),
        ("$(command ls)", "unsupported substitution $(command"),
        ("$(var ns", "is not closed"),
        ("$(var 'ns)", "quote ' is not closed"),
        ("$()", "expected a substitution name"),
        ("$(dirname extra)", "takes no arguments"),
        ("$(var a b)", "takes one argument"),
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
