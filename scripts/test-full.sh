#!/usr/bin/env bash
# `make test-full`: what `make test` skips, set up and run. Sets up the LeRobot reference environment (with the
# ACT training extras and the LeRobot plugins) and headless Chromium, installs the real launch_ros oracle from
# ../shared (beside the repository), then runs scripts/test.sh with every opt-in group on (the variables of the
# Makefile's test-* targets). Tests that still skip say why in the run's closing summary (not root, ../shared absent, ...).
# Extra arguments go to pytest.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh" --with-lerobot-reference --with-browser --with-lerobot-plugins
echo "==> real launch_ros oracle (../shared/oracles/ros2-launch)"
if [[ -f "$ROOT/../shared/oracles/ros2-launch/install.sh" ]]; then
  (cd "$ROOT/tests/lerobot_ros/launch" &&
    "$ROOT/.venv/bin/python" -c 'from real_launch import install_real_launch; print("    in", install_real_launch())')
else
  echo "    $ROOT/../shared is absent: the launch conformance and fixture-bag tests will skip (the summary says so)"
fi
export LEROBOT_ROS_REFERENCE=1 LEROBOT_ROS_BROWSER=1 LEROBOT_ROS_DEMO_E2E=1 LEROBOT_ROS_INSTALL_TEST=1 \
  LEROBOT_ROS_RELIABILITY=1 LEROBOT_ROS_MULTIHOST_MATRIX=1 LEROBOT_ROS_PARALLEL_EVAL=1 \
  LEROBOT_ROS_EXTENDED=1
exec bash "$ROOT/scripts/test.sh" "$@"
