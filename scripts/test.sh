#!/usr/bin/env bash
# The README's test command: set up (a no-op when nothing changed), lint, build the docs site, then run the tests.
# Extra arguments go to pytest, e.g. `scripts/test.sh -k launch -x`.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/lint.sh"
echo "==> documentation site (mkdocs build --strict)"
bash "$ROOT/scripts/docs.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
