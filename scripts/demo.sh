#!/usr/bin/env bash
# The README's main-job command (`make demo`).
# Today: brings up the demo launch file with `lerobot-ros launch`, shows the graph and its topic
# with the introspection commands, then shuts the stack down the way Ctrl-C would.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
export PATH="$ROOT/.venv/bin:$PATH"
# Keep the demo's graph to this machine and off any robot's domain.
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-42}

echo "==> lerobot-ros launch lerobot_ros talker.launch.yaml namespace:=demo rate_hz:=5.0"
lerobot-ros launch lerobot_ros talker.launch.yaml namespace:=demo rate_hz:=5.0 &
launcher=$!
trap 'kill -INT $launcher 2>/dev/null || true; wait $launcher 2>/dev/null || true' EXIT

echo "==> lerobot-ros topic echo /demo/chatter --once (waits for the topic)"
lerobot-ros topic echo /demo/chatter --once --timeout 30
echo "==> lerobot-ros node list"
lerobot-ros node list
echo "==> lerobot-ros topic list -t"
lerobot-ros topic list -t
echo "==> lerobot-ros topic hz /demo/chatter --duration 3"
lerobot-ros topic hz /demo/chatter --duration 3

echo "==> stopping the stack (SIGINT, as Ctrl-C)"
kill -INT $launcher
wait $launcher
trap - EXIT
echo "demo finished: the launcher exited cleanly"
