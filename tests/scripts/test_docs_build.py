"""`make docs` (scripts/docs.sh) fails on a link the built site would not resolve: a page that does not exist, and a
page left out of the site (`exclude_docs`, e.g. docs/benchmarks/notes/, shown inside the generated benchmark
pages), which MkDocs itself only reports at INFO."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build(tmp_path: Path, link: str) -> subprocess.CompletedProcess[str]:
    docs = tmp_path / "docs"
    (docs / "notes").mkdir(parents=True)
    (docs / "index.md").write_text(f"# Home\n\nSee [the page]({link}).\n")
    (docs / "notes" / "measured.md").write_text("# Measured\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        "site_name: t\ndocs_dir: docs\nexclude_docs: |\n  notes/\n"
        f"hooks:\n  - {REPO / 'scripts' / 'docs_strict_links.py'}\n"
    )
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "docs.sh"), "-f", str(config), "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_link_to_a_missing_page_fails_the_build(tmp_path: Path) -> None:
    result = build(tmp_path, "nowhere.md")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "'nowhere.md', but the target is not found" in result.stderr


def test_a_link_to_an_excluded_page_fails_the_build(tmp_path: Path) -> None:
    result = build(tmp_path, "notes/measured.md")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "WARNING" in result.stderr and "'notes/measured.md' which is excluded from the built site" in result.stderr


def test_a_good_link_builds(tmp_path: Path) -> None:
    result = build(tmp_path, "index.md")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
