#!/usr/bin/env bash
# Runs every benchmark in bench/ (bench_*.py), each writing JSON into bench/results/, then writes
# bench/results/summary.json and summary.md with every figure side by side.
# Extra arguments go to each benchmark (e.g. --quick).
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh" >/dev/null
PY=$ROOT/.venv/bin/python
mkdir -p "$ROOT/bench/results"
status=0
for bench in "$ROOT"/bench/bench_*.py; do
  [[ -e "$bench" ]] || continue
  echo "==> $(basename "$bench")"
  (cd "$ROOT" && "$PY" "$bench" "$@") || { echo "benchmark failed: $bench" >&2; status=1; }
done
"$PY" "$ROOT/bench/summarize.py" "$ROOT/bench/results"
exit $status
