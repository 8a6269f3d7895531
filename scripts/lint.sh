#!/usr/bin/env bash
# ruff over the whole repository, mypy --strict over the pure-Python cores.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${LEROBOT_ROS_VENV:-$ROOT/.venv}
[[ -x "$VENV/bin/ruff" ]] || { echo "no virtualenv at $VENV: run 'make setup' first" >&2; exit 1; }
cd "$ROOT"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
# The pure cores: no rclpy inside, typed strictly. Each later package adds its cores here.
mapfile -t cores < <(grep -v '^\s*#' scripts/mypy_cores.txt | grep -v '^\s*$')
"$VENV/bin/mypy" "${cores[@]}"
