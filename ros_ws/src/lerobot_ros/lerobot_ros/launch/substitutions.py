"""The `$(...)` substitutions of ROS 2 frontend launch files, with launch's grammar and escapes.

A template is literal text with embedded substitutions, `$(NAME ARG ...)`, read exactly as
`launch.frontend.grammar.lark` reads it:

- arguments are separated by exactly one space; an argument is unquoted text (no space, quote or
  parenthesis unless escaped with a backslash), nested substitutions, or one '...' / "..." string;
- a backslash escapes the next character everywhere (`\\$(` is a literal `$(`, `\\x` is `x`);
- a `$` not followed by `(` is literal.

Every substitution launch/launch_ros expose for the frontend and that has a meaning without a
running ROS graph is here: `var`, `env`, `find-pkg-share`, `find-pkg-prefix`, `exec-in-pkg`,
`find-exec`, `dirname`, `filename`, `anon`, `eval`, `command`, `file-content`, `not`, `and`, `or`,
`any`, `all`, `equals`, `not-equals`, `if`, and launch 3.8's `index` (of a `for` loop) and
`for-var` (of a `for_each` loop).
"""

from __future__ import annotations

import math
import os
import random
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lerobot_ros.bounded_yaml import load_yaml
from lerobot_ros.launch.errors import SubstitutionError

# name -> (min args, max args or None for any number)
ARITY: dict[str, tuple[int, int | None]] = {
    "var": (1, 2),
    "env": (1, 2),
    "find-pkg-share": (1, 1),
    "find-pkg-prefix": (1, 1),
    "exec-in-pkg": (2, 2),
    "find-exec": (1, 1),
    "dirname": (0, 0),
    "filename": (0, 0),
    "anon": (1, 1),
    "eval": (1, 2),
    "command": (1, 2),
    "file-content": (1, 1),
    "not": (1, 1),
    "and": (2, 2),
    "or": (2, 2),
    "any": (0, None),
    "all": (0, None),
    "equals": (2, 2),
    "not-equals": (2, 2),
    "if": (2, 3),
    "index": (1, 1),
    "for-var": (1, 2),
}
SUPPORTED = tuple(ARITY)
_HINTS = {
    "optenv": "launch_ros has no $(optenv); write $(env NAME '') for an optional variable",
    "param": "$(param) needs a running node; not supported by lerobot-ros launch",
    "log_dir": "not supported by lerobot-ros launch",
    "launch_log_dir": "not supported by lerobot-ros launch",
}
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_ESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True)
class Substitution:
    """`$(name args...)`; each argument is itself a template."""

    name: str
    args: tuple[Template, ...]


Fragment = str | Substitution
Template = tuple[Fragment, ...]


@dataclass(frozen=True)
class SubstitutionContext:
    """What substitutions read: launch configurations, the environment, the package index, the file.

    `configurations` is written to by `$(anon)` (as launch does: one name per id and launch).
    `executable_in_package` resolves `$(exec-in-pkg EXEC PKG)`; `loop_indices` and `loop_values` hold the
    `for` / `for_each` iterations around the entity.
    """

    configurations: Mapping[str, str]
    environ: Mapping[str, str]
    launch_file: Path
    package_share: Callable[[str], Path]
    package_prefix: Callable[[str], Path]
    executable_in_package: Callable[[str, str], Path] | None = None
    cwd: Path | None = None
    loop_indices: Mapping[str, int] = field(default_factory=dict)
    loop_values: Mapping[str, str] = field(default_factory=dict)


def unescape(text: str) -> str:
    """launch's `replace_escaped_characters`: a backslash keeps the character after it."""
    return _ESCAPE.sub(r"\1", text)


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def char(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if 0 <= index < len(self.text) else ""

    def error(self, problem: str) -> SubstitutionError:
        return SubstitutionError(f"cannot parse {self.text!r} at character {self.pos + 1}: {problem}")

    def at_substitution(self) -> bool:
        return self.char() == "$" and self.char(1) == "(" and self.char(-1) != "\\"

    def template(self) -> Template:
        fragments: list[Fragment] = []
        literal: list[str] = []
        while self.pos < len(self.text):
            if self.at_substitution():
                if literal:
                    fragments.append(unescape("".join(literal)))
                    literal = []
                fragments.append(self.substitution(None))
            else:
                literal.append(self.char())
                self.pos += 1
        if literal:
            fragments.append(unescape("".join(literal)))
        return tuple(fragments)

    def substitution(self, quote: str | None) -> Substitution:
        self.pos += 2  # "$("
        match = _IDENTIFIER.match(self.text, self.pos)
        if match is None:
            raise self.error("expected a substitution name after '$('")
        name = match.group(0)
        self.pos = match.end()
        args: list[Template] = []
        if self.char() == " ":
            self.pos += 1
            args.append(self.value(quote))
            while self.char() == " ":
                self.pos += 1
                args.append(self.value(quote))
        if self.pos >= len(self.text):
            raise self.error(f"'$({name}' is not closed with ')'")
        if self.char() != ")":
            raise self.error(f"unexpected {self.char()!r} in $({name} ...) (arguments are separated by one space)")
        self.pos += 1
        low, high = ARITY.get(name, (0, None))
        if name not in ARITY:
            hint = _HINTS.get(name, f"lerobot-ros launch supports {', '.join(SUPPORTED)}")
            raise SubstitutionError(f"unknown substitution $({name} ...); {hint}")
        if len(args) < low or (high is not None and len(args) > high):
            expected = str(low) if low == high else f"{low} to {high}" if high is not None else f"at least {low}"
            raise SubstitutionError(f"$({name}) takes {expected} argument(s), got {len(args)}")
        return Substitution(name, tuple(args))

    def _in_word(self, quote: str | None) -> bool:
        """Whether the current character belongs to an unquoted argument (launch's *_RSTRING tokens)."""
        char, escaped = self.char(), self.char(-1) == "\\"
        if char in ("", " "):
            return False
        if char in "()":
            return escaped
        if char in "'\"":
            return escaped or (quote is not None and char != quote)
        return True

    def value(self, quote: str | None) -> Template:
        if quote is None and self.char() in ("'", '"'):
            template = self.quoted(self.char())
            if self.char() not in (" ", ")", ""):
                raise self.error("a quoted argument must be followed by a space or ')'")
            return template
        fragments: list[Fragment] = []
        word: list[str] = []
        while True:
            if self.at_substitution():
                if word:
                    fragments.append(unescape("".join(word)))
                    word = []
                fragments.append(self.substitution(quote))
            elif self._in_word(quote):
                word.append(self.char())
                self.pos += 1
            else:
                break
        if word:
            fragments.append(unescape("".join(word)))
        if not fragments:
            raise self.error("expected an argument")
        return tuple(fragments)

    def quoted(self, quote: str) -> Template:
        self.pos += 1
        fragments: list[Fragment] = []
        text: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.error(f"quote {quote} is not closed")
            if self.at_substitution():
                if text:
                    fragments.append(unescape("".join(text)))
                    text = []
                fragments.append(self.substitution(quote))
                continue
            if self.char() == quote and self.char(-1) != "\\":
                self.pos += 1
                break
            text.append(self.char())
            self.pos += 1
        if text:
            fragments.append(unescape("".join(text)))
        return tuple(fragments)


def parse_template(text: str) -> Template:
    """Split `text` into literal text and substitutions; raises `SubstitutionError` when malformed."""
    return _Reader(text).template()


def has_substitutions(template: Template) -> bool:
    """Whether a parsed template holds a substitution (launch_ros YAML-parses only those values)."""
    return any(isinstance(part, Substitution) for part in template)


def evaluate(template: Template, context: SubstitutionContext) -> str:
    """The text of `template` with every substitution performed."""
    return "".join(part if isinstance(part, str) else _perform(part, context) for part in template)


def typed_bool(text: str) -> bool:
    """launch's `perform_typed_substitution(..., bool)`: '1'/'0', then a YAML bool (true, False, yes, off...)."""
    text = {"1": "true", "0": "false"}.get(text, text)
    try:
        value = load_yaml(text) if text else text
    except yaml.YAMLError:
        value = text
    if not isinstance(value, bool):
        raise SubstitutionError(f"{text!r} is not a boolean (true/false/1/0)")
    return value


def _is_bool_text(text: str) -> bool:
    return text.lower() in ("true", "false", "1", "0")


def _is_float_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _equals(left: str, right: str) -> bool:
    if _is_bool_text(left) and _is_bool_text(right):
        return (left.lower() in ("true", "1")) == (right.lower() in ("true", "1"))
    if _is_float_text(left) and _is_float_text(right):
        return math.isclose(float(left), float(right))
    return left == right


def _anon(name: str, context: SubstitutionContext) -> str:
    key = "anon" + name
    configurations = context.configurations
    if key not in configurations:
        if not isinstance(configurations, MutableMapping):
            raise SubstitutionError(f"$(anon {name}) cannot be evaluated here")
        generated = f"{name}_{socket.gethostname()}_{os.getpid()}_{random.randint(0, sys.maxsize)}"
        configurations[key] = generated.replace(".", "_").replace("-", "_").replace(":", "_")
    return configurations[key]


def _eval(expression: str, modules_text: str | None) -> str:
    import importlib

    names = [m.strip() for m in modules_text.split(",")] if modules_text else []
    scope: dict[str, object] = {}
    for name in names:
        module = importlib.import_module(name)
        if module.__name__ == "math":
            scope.update(vars(module))
        scope[module.__name__] = module
    try:
        return str(eval(expression, {}, scope))
    except Exception as err:
        raise SubstitutionError(f"$(eval {expression!r}) failed: {type(err).__name__}: {err}") from None


def _command(command_text: str, on_stderr: str, context: SubstitutionContext) -> str:
    if on_stderr not in ("fail", "ignore", "warn", "capture"):
        raise SubstitutionError("$(command): on_stderr must be one of fail, ignore, warn, capture")
    try:
        result = subprocess.run(
            shlex.split(command_text),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if on_stderr == "capture" else subprocess.PIPE,
            text=True,
            env=dict(context.environ),
            check=False,
        )
    except (FileNotFoundError, PermissionError) as err:
        raise SubstitutionError(f"$(command {command_text}): {err}") from None
    stderr = (result.stderr or "").strip()
    if result.returncode != 0:
        raise SubstitutionError(
            f"$(command {command_text}) exited with {result.returncode}" + (f": {stderr}" if stderr else "")
        )
    if stderr and on_stderr == "fail":
        raise SubstitutionError(
            f"$(command {command_text}) wrote to stderr: {stderr}; pass 'ignore' or 'warn' as second argument"
        )
    return result.stdout


def _perform(sub: Substitution, context: SubstitutionContext) -> str:
    name = sub.name

    def arg(index: int) -> str:
        return evaluate(sub.args[index], context)

    def boolean(index: int) -> bool:
        try:
            return typed_bool(arg(index))
        except SubstitutionError as err:
            raise SubstitutionError(f"$({name}): {err}") from None

    if name == "var":
        variable = arg(0)
        if variable in context.configurations:
            return context.configurations[variable]
        if len(sub.args) == 2:
            return arg(1)
        raise SubstitutionError(
            f"$(var {variable}): no launch argument or let named {variable!r} is set here; "
            f"declare it with an 'arg' or 'let' before this line, or pass {variable}:=VALUE"
        )
    if name == "env":
        variable = arg(0)
        if variable in context.environ:
            return context.environ[variable]
        if len(sub.args) == 2:
            return arg(1)
        raise SubstitutionError(
            f"$(env {variable}): environment variable {variable} is not set; set it, "
            f"or give a default: $(env {variable} DEFAULT)"
        )
    if name == "find-pkg-share":
        return str(context.package_share(arg(0)))
    if name == "find-pkg-prefix":
        return str(context.package_prefix(arg(0)))
    if name == "exec-in-pkg":
        executable, package = arg(0), arg(1)
        libexec = context.package_prefix(package) / "lib" / package
        found = shutil.which(executable, path=str(libexec)) if libexec.is_dir() else None
        if found is None:
            raise SubstitutionError(f"$(exec-in-pkg {executable} {package}): no executable {executable!r} in {libexec}")
        return found
    if name == "find-exec":
        found = shutil.which(arg(0), path=context.environ.get("PATH", os.defpath))
        if found is None:
            raise SubstitutionError(f"$(find-exec {arg(0)}): executable {arg(0)!r} not found on the PATH")
        return found
    if name == "dirname":
        return str(context.launch_file.parent)
    if name == "filename":
        return str(context.launch_file)
    if name == "anon":
        return _anon(arg(0), context)
    if name == "eval":
        return _eval(arg(0), arg(1) if len(sub.args) == 2 else None)
    if name == "command":
        return _command(arg(0), arg(1) if len(sub.args) == 2 else "fail", context)
    if name == "file-content":
        path = Path(arg(0))
        if not path.is_absolute() and context.cwd is not None:
            path = context.cwd / path
        try:
            return path.read_text()
        except FileNotFoundError:
            raise SubstitutionError(f"$(file-content): file not found: {path}") from None
    if name == "not":
        return str(not boolean(0)).lower()
    if name == "and":
        return str(boolean(0) and boolean(1)).lower()
    if name == "or":
        return str(boolean(0) or boolean(1)).lower()
    if name == "any":
        return str(any([boolean(i) for i in range(len(sub.args))])).lower()
    if name == "all":
        return str(all([boolean(i) for i in range(len(sub.args))])).lower()
    if name == "equals":
        return str(_equals(arg(0), arg(1))).lower()
    if name == "not-equals":
        return str(not _equals(arg(0), arg(1))).lower()
    if name == "if":
        if boolean(0):
            return arg(1)
        return arg(2) if len(sub.args) == 3 else ""
    if name == "index":
        loop = arg(0)
        if loop not in context.loop_indices:
            raise SubstitutionError(f"$(index {loop}): not inside a 'for' loop named {loop!r}")
        return str(context.loop_indices[loop])
    if name == "for-var":
        variable = arg(0)
        if variable in context.loop_values:
            return context.loop_values[variable]
        if len(sub.args) == 2:
            return arg(1)
        raise SubstitutionError(f"$(for-var {variable}): the for_each values here have no {variable!r}")
    raise SubstitutionError(f"unsupported substitution $({name} ...)")  # pragma: no cover - ARITY lists them


def substitute(text: str, context: SubstitutionContext) -> str:
    """Parse and evaluate `text` in one step."""
    return evaluate(parse_template(text), context)


def split_command_line(text: str, context: SubstitutionContext) -> list[str]:
    """Split a command line the way launch does (`ExecuteProcess._parse_cmdline`).

    The literal text is shell-split; a substitution's value stays whole and joins the text it touches:
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
            result.append(current or "")
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
