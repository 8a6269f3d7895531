#!/usr/bin/env bash
# A new user's install, checked on this machine: a scratch clone of the committed HEAD is set up from plain PyPI
# (this machine's pip configuration, wheel folders and pip cache ignored: PIP_CONFIG_FILE=/dev/null, no find-links,
# an empty cache) with Python 3.12, then the quick demo runs in it (one demonstration, 4 training steps, one 1 s
# evaluation episode). Prints the setup time, the venv's size and the demo's result, and writes them to
# $WORK/user-install.json.
# Usage: scripts/test-user-install.sh [--python python3.12] [--workdir DIR] [--keep]
# (make test-user-install; ~10 min and ~6 GB of downloads and disk: PyPI's torch is a CUDA build.)
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON_ARG=""
WORK=""
KEEP=0
while (($#)); do
  case $1 in
    --python) PYTHON_ARG=$2; shift 2 ;;
    --workdir) WORK=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-user-install: unknown option '$1' (known: --python, --workdir, --keep)" >&2; exit 2 ;;
  esac
done
if [[ -z $PYTHON_ARG ]]; then
  # Ubuntu 24.04's python3.12, else pyenv's.
  for candidate in python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12.*/bin/python3.12; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      PYTHON_ARG=$candidate; break
    fi
  done
  [[ -n $PYTHON_ARG ]] || { echo "test-user-install: no Python 3.12 found; pass --python /path/to/python3.12" >&2; exit 2; }
fi
WORK=${WORK:-$(mktemp -d /tmp/lerobot-ros-user-install.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
cleanup() {
  if [[ $KEEP == 0 ]]; then rm -rf "$WORK/repo" "$WORK/pip-cache"; fi
}
trap cleanup EXIT

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
echo "==> scratch clone of $COMMIT into $WORK/repo"
rm -rf "$WORK/repo"
git clone --quiet --no-hardlinks "$ROOT" "$WORK/repo"

# A user's pip: no machine configuration, no local wheel folders, an empty cache.
user_env=(env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT -u PIP_NO_INDEX
          PIP_CONFIG_FILE=/dev/null PIP_CACHE_DIR="$WORK/pip-cache" PYTHON="$PYTHON_ARG")

echo "==> setup from plain PyPI with $PYTHON_ARG"
# Bytes this machine received during the setup (every interface but loopback): what was downloaded, plus whatever
# else ran at the same time.
received_bytes() { awk -F'[: ]+' 'NR > 2 && $2 != "lo" {sum += $3} END {printf "%.0f", sum}' /proc/net/dev; }
rx_before=$(received_bytes)
start=$(date +%s)
load_before=$(cut -d' ' -f1 /proc/loadavg)
"${user_env[@]}" bash "$WORK/repo/scripts/setup.sh" 2>&1 | tee "$WORK/setup.log"
setup_s=$(($(date +%s) - start))
load_after=$(cut -d' ' -f1 /proc/loadavg)
download_mb=$((($(received_bytes) - rx_before) / 1000000))
venv_mb=$(du -sm "$WORK/repo/.venv" | cut -f1)
torch_version=$("$WORK/repo/.venv/bin/python" -c 'import torch; print(torch.__version__)')

echo "==> quick demo (make demo with one demonstration, 4 training steps, one 1 s evaluation episode)"
start=$(date +%s)
demo_rc=0
"${user_env[@]}" make -C "$WORK/repo" demo ARGS="--workdir $WORK/demo --episodes 1 --max-episode-s 2 \
  --train-steps 4 --batch-size 4 --eval-episodes 1 --eval-max-s 1" 2>&1 | tee "$WORK/demo.log" || demo_rc=$?
demo_s=$(($(date +%s) - start))
report=$WORK/demo/report/report.md
if [[ ! -f $report && $demo_rc == 0 ]]; then demo_rc=1; fi

"$WORK/repo/.venv/bin/python" - "$WORK/user-install.json" <<EOF
import json, platform, sys
result = {
    "commit": "$COMMIT", "python": "$("$PYTHON_ARG" -c 'import platform; print(platform.python_version())')",
    "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores", "torch": "$torch_version",
    "setup_s": $setup_s, "load_1min_before_after_setup": [$load_before, $load_after], "venv_mb": $venv_mb,
    "received_mb_during_setup": $download_mb,
    "demo_exit_code": $demo_rc, "demo_s": $demo_s, "report": "$report",
}
json.dump(result, open(sys.argv[1], "w"), indent=2)
print(json.dumps(result, indent=2))
EOF
if [[ $demo_rc != 0 ]]; then
  echo "test-user-install: the quick demo failed (exit $demo_rc); logs in $WORK/demo.log" >&2
  KEEP=1
  exit 1
fi
echo "test-user-install: setup ${setup_s} s (${download_mb} MB received, venv ${venv_mb} MB, torch $torch_version), quick demo ${demo_s} s: ok"
