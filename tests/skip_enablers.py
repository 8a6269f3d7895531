"""What `make test` leaves unproved: each skip reason with the command that runs those tests (`make test-full` runs
them all). The reason's words pick the command; a test's opt-in marker does where they do not. Used by the
`pytest_terminal_summary` hook of tests/conftest.py."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

ENABLE_ALL = "make test-full"
_SETUP_REFERENCE = "make test-lerobot (LeRobot 0.6.1's environment with the plugins; make test-lerobot-044 for 0.4.4)"
_BY_MARKER = {
    "demo_e2e": "make test-demo",
    "extended": "make test-extended",
    "browser": "make test-browser (Chromium: scripts/setup.sh --with-browser)",
    "reliability": "make reliability",
    "install": "make test-install",
    "multihost_matrix": "LEROBOT_ROS_MULTIHOST_MATRIX=1 .venv/bin/python -m pytest tests/multihost",
    "parallel_eval": "LEROBOT_ROS_PARALLEL_EVAL=1 .venv/bin/python -m pytest tests/lerobot_eval tests/lerobot_training",
    "reference": _SETUP_REFERENCE,
}
_BY_REASON = [
    (re.compile(r"LEROBOT_ROS_PARALLEL_EVAL"), _BY_MARKER["parallel_eval"]),
    (re.compile(r"--with-lerobot-plugins"), _SETUP_REFERENCE),
    (re.compile(r"lerobot-ref|lerobot-reference|LeRobot reference"), _SETUP_REFERENCE),
    (re.compile(r"chromium", re.IGNORECASE), _BY_MARKER["browser"]),
    (
        re.compile(r"shared/|\.\./shared|oracle|fixture bag", re.IGNORECASE),
        "the shared/ folder beside the repository (the real launch_ros oracle, the fixture bags)",
    ),
    (re.compile(r"\broot\b"), "run the tests as root"),
]


def skip_enabler(reason: str, markers: Iterable[str]) -> str | None:
    """The command that runs a test skipped for `reason` (its keywords: `markers`); None when there is none."""
    for pattern, command in _BY_REASON:
        if pattern.search(reason):
            return command
    return next((command for marker, command in _BY_MARKER.items() if marker in markers), None)


def skip_summary(reports: Iterable[pytest.TestReport]) -> list[str]:
    """Lines grouping the skipped `reports` by reason, most skipped first, each with the command that enables it."""
    groups: dict[str, tuple[int, str | None]] = {}
    for report in reports:
        if not isinstance(report.longrepr, tuple):
            continue
        reason = report.longrepr[2].removeprefix("Skipped: ")
        count, command = groups.get(reason, (0, skip_enabler(reason, report.keywords)))
        groups[reason] = (count + 1, command)
    lines = []
    for reason, (count, command) in sorted(groups.items(), key=lambda g: (-g[1][0], g[0])):
        lines.append(f"{count:4d}  {reason}")
        lines.append(f"      enable: {command}" if command else "      (no command enables it: see the reason)")
    return lines
