#!/usr/bin/env bash
# `make docs`: build the documentation site (MkDocs + Material, mkdocs.yml) into site/ with --strict, so a broken
# link, a link to a page left out of the site (scripts/docs_strict_links.py), a missing page or a reference page that
# cannot be generated fails. Open site/index.html, or serve it with
# `.venv/bin/mkdocs serve` (http://127.0.0.1:8000). Extra arguments go to `mkdocs build`.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export NO_MKDOCS_2_WARNING=1
# Not --quiet: it silences MkDocs' warnings at the source, so --strict has none to count and passes broken links.
exec "$ROOT/.venv/bin/mkdocs" build --strict "$@"
