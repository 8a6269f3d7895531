"""The documented commands stay true: every `lerobot-ros launch` line resolves, every other `lerobot-ros` line parses.

Commands come from the shell code blocks of the README and of every page of the documentation site (docs/)
(continuation lines joined, comments and anything after a
shell operator dropped). Files the README tells the reader to create are created first, in a scratch
folder that mirrors the repository: `cp SRC DST` lines copy, and YAML blocks whose first line is
`# NAME.yaml...` are written as NAME.yaml (contracts among them are loaded, so they must be valid).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from lerobot_contract import load_contract
from lerobot_ros.cli import build_parser, load_commands

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").rglob("*.md"))]
LEROBOT_ROS = Path(sys.prefix) / "bin" / "lerobot-ros"
SHELL_LANGUAGES = {"bash", "sh", "shell", "console", ""}
SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ";;", "(", ")", "<", ">", ">>"}
FLAG = re.compile(r"^--?[A-Za-z0-9][\w-]*")
FILE_HEADER = re.compile(r"^#\s*([\w.-]+\.ya?ml)\b")


@dataclass(frozen=True)
class CodeBlock:
    language: str
    line: int  # README line of the block's first content line
    text: str


@dataclass(frozen=True)
class Command:
    line: int
    argv: tuple[str, ...]
    source: str = "README.md"

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {shlex.join(self.argv)}"


def code_blocks(markdown: str) -> list[CodeBlock]:
    """Fenced code blocks (```lang ... ```) with their language and position."""
    blocks: list[CodeBlock] = []
    language: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(markdown.splitlines(), start=1):
        fence = line.strip()
        if language is None and fence.startswith("```"):
            language, start, body = fence[3:].strip().lower(), number + 1, []
        elif language is not None and fence == "```":
            blocks.append(CodeBlock(language, start, "\n".join(body)))
            language = None
        elif language is not None:
            body.append(line)
    return blocks


def _open_quote(text: str) -> bool:
    """Whether `text` ends inside a quoted string (the shell reads on into the next line)."""
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return True
    return False


def _logical_lines(block: CodeBlock) -> Iterator[tuple[int, str]]:
    """Lines with backslash continuations and quoted line breaks joined, each with the line it starts on."""
    pending: list[str] = []
    first = 0
    for offset, line in enumerate(block.text.splitlines()):
        if not pending:
            first = block.line + offset
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        if _open_quote(" ".join(pending)):
            continue
        yield first, " ".join(pending)
        pending = []
    if pending:
        yield first, " ".join(pending)


def _words(line: str) -> list[str]:
    """The first simple command of a shell line: words up to the first operator, comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for token in lexer:
        if token in SHELL_OPERATORS:
            break
        words.append(token)
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):  # VAR=value prefixes
        words.pop(0)
    return words


def shell_commands(markdown: str, program: str, source: str = "README.md") -> list[Command]:
    """Every command line of the shell blocks that runs `program`."""
    found = []
    for block in code_blocks(markdown):
        if block.language not in SHELL_LANGUAGES:
            continue
        for line, text in _logical_lines(block):
            words = _words(text)
            if words and words[0] == program:
                found.append(Command(line, tuple(words), source))
    return found


def prepare_workspace(markdown: str, workspace: Path) -> list[Path]:
    """Mirror the repository in `workspace` and create the files the README has the reader write."""
    for entry in REPO.iterdir():
        if not entry.name.startswith("."):
            (workspace / entry.name).symlink_to(entry)
    for command in shell_commands(markdown, "cp"):
        source, target = command.argv[-2:]
        shutil.copy(REPO / source, workspace / target)
    written = []
    for block in code_blocks(markdown):
        first_line = block.text.splitlines()[0] if block.text else ""
        header = FILE_HEADER.match(first_line)
        if block.language in {"yaml", "yml"} and header:
            path = workspace / header.group(1)
            path.write_text(block.text + "\n")
            written.append(path)
    return written


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def check_cli_line(parser: argparse.ArgumentParser, command: Command) -> list[str]:
    """Problems of one `lerobot-ros ...` line: flags its --help does not list, arguments argparse refuses."""
    problems = []
    sub, args = parser, list(command.argv[1:])
    while args and args[0] in _subparsers(sub):
        sub = _subparsers(sub)[args.pop(0)]
    listed = set(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", sub.format_help()))
    for word in args:
        flag = FLAG.match(word)
        if flag and flag.group(0) not in listed and word.split("=")[0] == flag.group(0):
            problems.append(f"{flag.group(0)} is not listed by `{sub.prog} --help`")
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(list(command.argv[1:]))
        except SystemExit as exit_:
            if exit_.code:
                problems.append(stderr.getvalue().strip().splitlines()[-1])
    return problems


TEXTS = {str(path.relative_to(REPO)): path.read_text() for path in DOCS}
README_TEXT = "\n".join(TEXTS.values())
CLI_COMMANDS = [c for source, text in TEXTS.items() for c in shell_commands(text, "lerobot-ros", source)]
LAUNCH_COMMANDS = [c for c in CLI_COMMANDS if c.argv[1:2] == ("launch",)]


def _ids(commands: list[Command]) -> list[str]:
    return [f"{c.source}:{c.line}" for c in commands]


def test_extraction_joins_continuations_and_stops_at_operators_and_comments() -> None:
    sample = (
        "text\n```bash\n"
        "lerobot-ros bag record -e '^/(a|b)/' -o bags/x \\\n    --duration 5   # a comment\n"
        'MUJOCO_GL=egl lerobot-ros launch f.yaml task:="pick the cube" cameras:="" | tee log\n'
        "echo lerobot-ros\n```\n"
        "```yaml\nlerobot-ros: not a command\n```\n"
    )
    commands = shell_commands(sample, "lerobot-ros")
    assert [c.argv for c in commands] == [
        ("lerobot-ros", "bag", "record", "-e", "^/(a|b)/", "-o", "bags/x", "--duration", "5"),
        ("lerobot-ros", "launch", "f.yaml", "task:=pick the cube", "cameras:="),
    ]
    assert [c.line for c in commands] == [3, 5]


def test_cli_check_rejects_unknown_flags_and_values() -> None:
    parser = build_parser(load_commands())
    assert check_cli_line(parser, Command(1, ("lerobot-ros", "topic", "hz", "/x", "--duration", "3"))) == []
    problems = check_cli_line(parser, Command(1, ("lerobot-ros", "topic", "hz", "/x", "--spin", "3")))
    assert any("--spin is not listed" in p for p in problems)
    problems = check_cli_line(parser, Command(1, ("lerobot-ros", "train", "--out", "r", "--policy", "pi0")))
    assert any("invalid choice" in p for p in problems)


def test_the_docs_document_the_user_stories() -> None:
    covered = {c.argv[1] for c in CLI_COMMANDS if len(c.argv) > 1}
    assert {"launch", "topic", "node", "bag", "bag2dataset", "dataset", "dataset2bag", "train", "eval"} <= covered
    assert len(LAUNCH_COMMANDS) >= 10


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=_ids(CLI_COMMANDS))
def test_cli_line_uses_real_flags(command: Command) -> None:
    problems = check_cli_line(build_parser(load_commands()), command)
    assert not problems, f"{command}: {'; '.join(problems)}"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme_workspace")
    for path in prepare_workspace(README_TEXT, root):
        if "features" in (yaml.safe_load(path.read_text()) or {}):
            load_contract(path)  # a contract the README shows must load
    return root


@pytest.mark.parametrize("command", LAUNCH_COMMANDS, ids=_ids(LAUNCH_COMMANDS))
def test_launch_line_resolves(command: Command, workspace: Path) -> None:
    argv = [str(LEROBOT_ROS), "launch", "--print", *command.argv[2:]]
    result = subprocess.run(
        argv, cwd=workspace, env=dict(os.environ), capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"{command}:\n{result.stderr.strip()}"
