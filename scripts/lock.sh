#!/usr/bin/env bash
# Freeze every installed third-party distribution into requirements/constraints.txt.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
{
  echo "# Exact versions of the whole environment, written by scripts/lock.sh; setup installs with -c this file."
  "$ROOT/.venv/bin/python" -m pip freeze --exclude-editable --all | grep -v -E '^(pip|setuptools|wheel)==' | grep -v ' @ '
} > "$ROOT/requirements/constraints.txt"
echo "wrote requirements/constraints.txt"
