#!/usr/bin/env bash
# The README's main-job command (`make demo`): the whole mission in simulation, about 9 minutes on 2 idle cores.
# `lerobot-ros demo all` records demonstrations of the simulated SO-101 (MuJoCo sim bridge + scripted
# pick-and-place expert + recorder -> LeRobot v3 dataset), trains ACT on them on CPU, deploys the policy with
# the policy node and the action executor against the sim in real time on unseen seeds, and writes
# outputs/demo/report/report.md (training curve, success vs the scripted expert, chunk latency, a GIF).
# Everything stays in outputs/demo; running it again resumes (only missing work is done). Extra arguments go
# to `lerobot-ros demo all` (e.g. `make demo ARGS="--episodes 50"`, or `bash scripts/demo.sh --workdir DIR`).
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
export PATH="$ROOT/.venv/bin:$PATH"
# Keep the demo's graph to this machine and off any robot's domain.
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-42}
cd "$ROOT"
echo "==> lerobot-ros demo all $*"
lerobot-ros demo all "$@"
