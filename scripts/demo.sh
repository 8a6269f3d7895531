#!/usr/bin/env bash
# The README's main-job command (`make demo`): demonstrations in simulation, recorded live into a LeRobot v3
# dataset. `lerobot-ros demo record` runs launch/sim_record.launch.yaml (SO-101 MuJoCo sim bridge + scripted
# pick-and-place expert + recorder), turns each expert episode into a dataset episode through the recorder's
# RecordEpisode action, then prints the dataset path, a summary (episodes, frames, dropped, per-feature skew)
# and validates the dataset. About a minute for the default 3 episodes on 2 cores.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
export PATH="$ROOT/.venv/bin:$PATH"
# Keep the demo's graph to this machine and off any robot's domain.
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-42}
cd "$ROOT"
echo "==> lerobot-ros demo record --episodes ${DEMO_EPISODES:-3}"
lerobot-ros demo record --episodes "${DEMO_EPISODES:-3}" "$@"
