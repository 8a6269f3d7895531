#!/usr/bin/env bash
# Runs every benchmark in bench/ (bench_*.py), each writing JSON into bench/results/, then writes
# bench/results/summary.json and summary.md: one table of every benchmark's headline figures next to
# their same-run baselines and targets, then per-benchmark details, with the date, commit and machine load.
# Extra arguments go to each benchmark (e.g. --quick). Every benchmark runs even when one fails; the exit
# status is then non-zero, and the summary lists the failed ones as "no result".
# --publish (first argument) also copies the results into docs/benchmarks/results/ for the docs site's pages.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh" >/dev/null
PY=$ROOT/.venv/bin/python
RESULTS=$ROOT/bench/results
mkdir -p "$RESULTS"
started=$(date +%s)
loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)
publish=()
if [[ ${1:-} == --publish ]]; then
  publish=(--publish "$ROOT/docs/benchmarks/results")
  shift
fi
status=0
exits=()
for bench in "$ROOT"/bench/bench_*.py; do
  [[ -e "$bench" ]] || continue
  name=$(basename "$bench" .py)
  echo "==> $name.py $*"
  rc=0
  (cd "$ROOT" && "$PY" "$bench" "$@") || rc=$?
  exits+=(--status "${name#bench_}=$rc")
  if ((rc != 0)); then
    echo "benchmark failed: $name.py (exit status $rc)" >&2
    status=1
  fi
done
"$PY" "$ROOT/bench/summarize.py" "$RESULTS" --since "$started" --loadavg-start="$loadavg_start" --args="$*" \
  "${exits[@]}" "${publish[@]}" || status=1
echo "summary: $RESULTS/summary.md"
exit $status
