#!/usr/bin/env bash
# `make reliability`: the full reliability counts (tests/reliability with the `reliability` marker on):
# >= 10,000 fuzzed inputs per parser, >= 100 kill -9 points, servo faults, disk-full sizes. Prints the counts
# table (tried / ok / clear error / crash / hang / data lost per target) and writes bench/results/reliability.json
# and bench/results/reliability_findings.md. Extra arguments go to pytest (e.g. -k fuzz).
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export LEROBOT_ROS_RELIABILITY=1
exec "$ROOT/.venv/bin/python" -m pytest tests/reliability -p no:cacheprovider -q -o addopts="-ra --strict-markers" \
  --timeout 7200 "$@"
