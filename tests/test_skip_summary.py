"""`make test` says what it did not prove: the skipped tests grouped by reason, each with the command that runs them.

The summary is tests/conftest.py's `pytest_terminal_summary` (its table: tests/skip_enablers.py); pytest's own
closing line (`N passed, M skipped in ...`) stays the last line of the run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from skip_enablers import ENABLE_ALL, skip_enabler, skip_summary

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("reason", "markers", "command"),
    [
        (
            "the LeRobot reference venv (.venv-lerobot-ref) is absent; build it with scripts/setup.sh "
            "--with-lerobot-reference",
            {"reference"},
            "make test-lerobot",
        ),
        ("Debian's chromium is not installed (scripts/setup.sh --with-browser)", {"browser"}, "make test-browser"),
        ("headless-browser test: run `make test-browser` (or pytest -m browser)", {"browser"}, "make test-browser"),
        ("the tiny demo end to end (2-8 min): run `make test-demo`", {"demo_e2e"}, "make test-demo"),
        ("full reliability counts: run `make reliability`", {"reliability"}, "make reliability"),
        ("about 40 s (nine wheel builds): make test-install (LEROBOT_ROS_INSTALL_TEST=1) runs it", {"install"},
         "make test-install"),
        ("the two-host matrix: pytest -m multihost_matrix", {"multihost_matrix"}, "LEROBOT_ROS_MULTIHOST_MATRIX=1"),
        ("about 2 min: LEROBOT_ROS_PARALLEL_EVAL=1 (or -m parallel_eval) runs it", {"ros"},
         "LEROBOT_ROS_PARALLEL_EVAL=1"),
        ("real fixture bags not found at /x/shared/fixtures/bags (they live outside the repository)", set(), "shared/"),
        ("/x/shared/oracles/ros2-launch is absent: the real launch_ros oracle cannot be installed", set(), "shared/"),
        ("network namespaces need root (CI runs the tests as root)", set(), "as root"),
    ],
)  # fmt: skip
def test_each_skip_reason_of_the_suite_names_its_command(reason: str, markers: set[str], command: str) -> None:
    enabler = skip_enabler(reason, markers)
    assert enabler is not None and command in enabler


def test_skips_are_grouped_by_reason_most_first() -> None:
    class Report:
        def __init__(self, reason: str, keywords: set[str]) -> None:
            self.longrepr = ("file.py", 1, f"Skipped: {reason}")
            self.keywords = {k: 1 for k in keywords}

    reports = [Report("needs root", set()), Report("opt-in", {"install"}), Report("opt-in", {"install"})]
    assert skip_summary(reports) == [  # type: ignore[arg-type]
        "   2  opt-in",
        "      enable: make test-install",
        "   1  needs root",
        "      enable: run the tests as root",
    ]
    assert skip_summary([Report("sbatch exists here", set())]) == [  # type: ignore[list-item]
        "   1  sbatch exists here",
        "      (no command enables it: see the reason)",
    ]


def test_a_run_with_skips_ends_with_the_summary_then_pytests_closing_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LEROBOT_ROS_BROWSER" and not k.startswith("PYTEST_")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/lerobot_recorder/view/test_view_browser.py", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = run.stdout.rstrip().splitlines()
    assert run.returncode == 0, run.stdout[-3000:]
    skipped = int(re.search(r"(\d+) skipped", lines[-1]).group(1))  # type: ignore[union-attr]
    assert skipped >= 1, lines[-1]
    start = next(i for i, line in enumerate(lines) if f"not proved by this run: {skipped} skipped, by reason" in line)
    assert [line for line in lines[start + 1 : start + 5] if line] == [
        f"{skipped:>4}  headless-browser test: run `make test-browser` (or pytest -m browser)",
        "      enable: make test-browser (Chromium: scripts/setup.sh --with-browser)",
        f"`{ENABLE_ALL}` sets up what they need and runs them all.",
    ]
    assert "not proved" not in "".join(lines[start + 5 :])


def test_make_test_full_switches_on_every_opt_in_group() -> None:
    """test-full sets every opt-in variable the Makefile's targets and the summary's commands use."""
    import re

    from skip_enablers import _BY_MARKER

    variable = re.compile(r"(LEROBOT_ROS_[A-Z0-9_]+)=1")
    recipes = [line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("\t")]
    opt_in = {m.group(1) for line in [*recipes, *_BY_MARKER.values()] for m in variable.finditer(line)}
    script = (REPO / "scripts" / "test-full.sh").read_text()
    exported = set(variable.findall(script))
    assert opt_in and opt_in <= exported, sorted(opt_in - exported)
    assert "--with-lerobot-reference --with-browser" in script and "install_real_launch" in script
    assert re.search(r"^test-full:\n\tbash scripts/test-full.sh", (REPO / "Makefile").read_text(), re.MULTILINE)
