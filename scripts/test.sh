#!/usr/bin/env bash
# The README's test command: set up (a no-op when nothing changed), lint, then run the test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -k launch -x`.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/lint.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
