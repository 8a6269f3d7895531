"""The documentation site: built with --strict from the repository, served over loopback and opened in a real
browser (headless Chromium): the home page, a guide, a CLI reference page, a node reference page and a benchmark
page render with their content. Skips with a reason when Debian's `chromium` is not installed."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from docs_gen import all_pages, executables  # noqa: E402


def test_every_cli_command_and_node_has_a_reference_page() -> None:
    from lerobot_ros.cli import load_commands

    pages = all_pages()
    for name in load_commands():
        assert f"reference/cli/{name}.md" in pages, name
        assert f"usage: lerobot-ros {name}" in pages[f"reference/cli/{name}.md"]
    nodes = [p for p in pages if p.startswith("reference/nodes/") and not p.endswith("index.md")]
    assert "reference/nodes/lerobot_recorder.recorder.md" in nodes
    assert "reference/nodes/lerobot_policy_node.action_executor.md" in nodes
    # every executable is a node with a page, except the plain command-line tools, which take no ROS parameters
    tools = {"fake_servo_bus", "lerobot-ros", "sim_render_meshes"}
    without = {exe for package, exe, _ in executables() if f"reference/nodes/{package}.{exe}.md" not in pages}
    assert without == tools
    for script in (REPO / "bench").glob("bench_*.py"):
        assert f"benchmarks/{script.stem.removeprefix('bench_')}.md" in pages


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs Debian's chromium: scripts/setup.sh --with-browser (or apt-get install chromium)")
    out = Path(tempfile.mkdtemp(prefix="site-"))
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [str(REPO / ".venv" / "bin" / "mkdocs"), "build", "--strict", "-d", str(out)],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(out, ignore_errors=True)


def dom(url: str) -> str:
    """The page's DOM after it loaded and ran its scripts in headless Chromium."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe is not None
    profile = tempfile.mkdtemp(prefix="chromium-docs-")
    try:
        done = subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=5000",
                "--dump-dom",
                url,
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", ["lerobot-ros", "Getting started", "Guides", "Benchmarks"]),
        ("/guides/record-and-convert/", ["Record demonstrations and convert bags", "sync report"]),
        ("/benchmarks/reliability/", ["accepted with changed data"]),
        ("/reference/cli/bag2dataset/", ["usage: lerobot-ros bag2dataset", "--contract"]),
        ("/reference/nodes/lerobot_recorder.recorder/", ["episode_time_s", "read-only"]),
        ("/benchmarks/bag2dataset/", ["How to run it", "Last published result"]),
    ],
)
def test_pages_open_in_a_browser(site: str, path: str, expected: list[str]) -> None:
    page = dom(site + path)
    assert "md-content" in page, f"{path}: not a rendered Material page"
    for text in expected:
        assert text in page, f"{path}: {text!r} not on the page"
