"""The `$(...)` substitutions of ROS 2 frontend launch files.

A template is literal text with embedded substitutions, `$(NAME ARG ...)`. Arguments are separated
by spaces and may be quoted with '...' or "..."; substitutions nest (`$(var $(env ROBOT))`).
Supported: `var`, `env` (with an optional default), `optenv`, `find-pkg-share`, `find-pkg-prefix`,
`dirname`, `filename`. Any other name (`eval`, `command`, `anon`, ...) is rejected.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lerobot_ros.launch.errors import SubstitutionError

SUPPORTED = ("var", "env", "optenv", "find-pkg-share", "find-pkg-prefix", "dirname", "filename")


@dataclass(frozen=True)
class Substitution:
    """`$(name args...)`; each argument is itself a template."""

    name: str
    args: tuple[Template, ...]


Fragment = str | Substitution
Template = tuple[Fragment, ...]


@dataclass(frozen=True)
class SubstitutionContext:
    """What substitutions read: launch configurations, the environment, the package index, the file."""

    configurations: Mapping[str, str]
    environ: Mapping[str, str]
    launch_file: Path
    package_share: Callable[[str], Path]
    package_prefix: Callable[[str], Path]


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def error(self, problem: str) -> SubstitutionError:
        return SubstitutionError(f"cannot parse {self.text!r} at character {self.pos + 1}: {problem}")

    def substitution(self) -> Substitution:
        self.pos += 2  # "$("
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_-"):
            self.pos += 1
        name = self.text[start : self.pos]
        if not name:
            raise self.error("expected a substitution name after '$('")
        args: list[Template] = []
        while True:
            if self.pos >= len(self.text):
                raise self.error(f"'$({name}' is not closed with ')'")
            char = self.text[self.pos]
            if char == ")":
                self.pos += 1
                return Substitution(name, tuple(args))
            if char.isspace():
                self.pos += 1
                continue
            args.append(self.argument())

    def argument(self) -> Template:
        fragments: list[Fragment] = []
        text: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char.isspace() or char == ")":
                break
            if self.peek(2) == "$(":
                if text:
                    fragments.append("".join(text))
                    text = []
                fragments.append(self.substitution())
            elif char in "'\"":
                if text:
                    fragments.append("".join(text))
                    text = []
                fragments.extend(self.quoted(char))
            elif char == "\\" and self.pos + 1 < len(self.text):
                text.append(self.text[self.pos + 1])
                self.pos += 2
            else:
                text.append(char)
                self.pos += 1
        if text:
            fragments.append("".join(text))
        return tuple(fragments)

    def quoted(self, quote: str) -> list[Fragment]:
        self.pos += 1
        fragments: list[Fragment] = []
        text: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.error(f"quote {quote} is not closed")
            char = self.text[self.pos]
            if char == quote:
                self.pos += 1
                break
            if self.peek(2) == "$(":
                if text:
                    fragments.append("".join(text))
                    text = []
                fragments.append(self.substitution())
            elif char == "\\" and self.pos + 1 < len(self.text):
                text.append(self.text[self.pos + 1])
                self.pos += 2
            else:
                text.append(char)
                self.pos += 1
        if text or not fragments:
            fragments.append("".join(text))
        return fragments


def parse_template(text: str) -> Template:
    """Split `text` into literal text and substitutions; raises `SubstitutionError` when malformed."""
    reader = _Reader(text)
    fragments: list[Fragment] = []
    literal: list[str] = []
    while reader.pos < len(text):
        if reader.peek(2) == "$(":
            if literal:
                fragments.append("".join(literal))
                literal = []
            fragments.append(reader.substitution())
        else:
            literal.append(text[reader.pos])
            reader.pos += 1
    if literal:
        fragments.append("".join(literal))
    return tuple(fragments)


def has_substitutions(text: str) -> bool:
    return "$(" in text


def _expect_args(sub: Substitution, low: int, high: int, usage: str) -> None:
    if not low <= len(sub.args) <= high:
        raise SubstitutionError(f"$({sub.name}) takes {usage}, got {len(sub.args)} argument(s)")


def evaluate(template: Template, context: SubstitutionContext) -> str:
    """The text of `template` with every substitution performed."""
    return "".join(part if isinstance(part, str) else _perform(part, context) for part in template)


def _perform(sub: Substitution, context: SubstitutionContext) -> str:
    args = [evaluate(arg, context) for arg in sub.args]
    if sub.name == "var":
        _expect_args(sub, 1, 1, "one argument, the launch argument name")
        if args[0] not in context.configurations:
            raise SubstitutionError(
                f"$(var {args[0]}): no launch argument or let named {args[0]!r} is set here; "
                f"declare it with an 'arg' or 'let' before this line, or pass {args[0]}:=VALUE"
            )
        return context.configurations[args[0]]
    if sub.name == "env":
        _expect_args(sub, 1, 2, "a variable name and an optional default")
        if args[0] in context.environ:
            return context.environ[args[0]]
        if len(args) == 2:
            return args[1]
        raise SubstitutionError(
            f"$(env {args[0]}): environment variable {args[0]} is not set; set it, "
            f"or give a default: $(env {args[0]} DEFAULT)"
        )
    if sub.name == "optenv":
        _expect_args(sub, 1, 2, "a variable name and an optional default")
        return context.environ.get(args[0], args[1] if len(args) == 2 else "")
    if sub.name == "find-pkg-share":
        _expect_args(sub, 1, 1, "one argument, the package name")
        return str(context.package_share(args[0]))
    if sub.name == "find-pkg-prefix":
        _expect_args(sub, 1, 1, "one argument, the package name")
        return str(context.package_prefix(args[0]))
    if sub.name == "dirname":
        _expect_args(sub, 0, 0, "no arguments")
        return str(context.launch_file.parent)
    if sub.name == "filename":
        _expect_args(sub, 0, 0, "no arguments")
        return str(context.launch_file)
    raise SubstitutionError(
        f"unsupported substitution $({sub.name} ...); lerobot-ros launch supports {', '.join(SUPPORTED)}"
    )


def substitute(text: str, context: SubstitutionContext) -> str:
    """Parse and evaluate `text` in one step."""
    return evaluate(parse_template(text), context)


def split_command_line(text: str, context: SubstitutionContext) -> list[str]:
    """Split a command line the way launch does: shell-split the literal text, keep each substitution's value whole.

    `$(find-pkg-share x)/cfg.yaml --flag $(var v)` gives three arguments even if `v` contains spaces.
    """
    result: list[str] = []
    current: str | None = None
    for fragment in parse_template(text):
        if isinstance(fragment, Substitution):
            current = (current or "") + _perform(fragment, context)
            continue
        try:
            tokens = shlex.split(fragment)
        except ValueError as err:
            raise SubstitutionError(f"cannot split {fragment!r} into arguments: {err}; check its quotes") from None
        if not tokens:
            if current is not None:
                result.append(current)
                current = None
            continue
        if fragment[0].isspace() and current is not None:
            result.append(current)
            current = None
        current = (current or "") + tokens[0]
        for token in tokens[1:]:
            result.append(current)
            current = token
        if fragment[-1].isspace():
            result.append(current)
            current = None
    if current is not None:
        result.append(current)
    return result
