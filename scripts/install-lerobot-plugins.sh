#!/usr/bin/env bash
# Install the LeRobot plugins (lerobot_plugins/*: --robot.type=ros, --teleop.type=ros, camera type ros) into a
# LeRobot environment, so that LeRobot's own scripts (lerobot-record, -teleoperate, -replay, async inference's
# robot_client) drive ROS 2 robots. See docs/guides/lerobot-cli.md.
#
#   scripts/install-lerobot-plugins.sh [--editable] [--no-ros-wheels] [--dry-run] [PYTHON]
#
# PYTHON       the LeRobot environment's python (default: `python` on PATH, e.g. an activated LeRobot venv).
# --no-ros-wheels  rclpy and the messages come from a sourced ROS 2 install, not from PyPI's ros-* wheels.
# --editable   install the project packages and plugins editable (a development checkout).
# --dry-run    check the environment (LeRobot and Python versions) and stop; nothing is installed.
#
# It installs the ROS 2 Kilted runtime wheels (requirements/ros.txt above its interface-generation part), those
# of the few packages LeRobot's scripts import beyond LeRobot (requirements/lerobot-plugins.txt) it lacks, the project
# packages the plugins use (lerobot_contract, lerobot_ros, lerobot_policy_node, training) and the plugins, all but
# the ROS wheels with --no-deps: the environment's torch, numpy and LeRobot stay as they are. Tested on LeRobot
# 0.6.x (Python 3.12) and 0.4.x from 0.4.4 (Python 3.10-3.12); other versions are refused. Ends by checking that
# LeRobot finds the three plugins.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
EDITABLE=0
DRY_RUN=0
ROS_WHEELS=1
PY=python
for arg in "$@"; do
  case $arg in
    --editable) EDITABLE=1 ;;
    --no-ros-wheels) ROS_WHEELS=0 ;;
    --dry-run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "install-lerobot-plugins: unknown option '$arg' (known: --editable, --no-ros-wheels, --dry-run, --help)" >&2; exit 2 ;;
    *) PY=$arg ;;
  esac
done
fail() {
  echo "install-lerobot-plugins: $*" >&2
  exit 1
}
command -v "$PY" >/dev/null || fail "no python '$PY'; give the LeRobot environment's python, e.g. ~/lerobot/.venv/bin/python"
# A relative path made absolute: the checks run from a throwaway folder.
if [[ $PY == */* ]]; then PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY"); fi

# LeRobot's scripts are run from a throwaway folder: its async inference modules create logs/ in the working dir.
in_tmp() {
  local dir rc=0
  dir=$(mktemp -d)
  (cd "$dir" && env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u LD_LIBRARY_PATH "$PY" "$@") || rc=$?
  rm -rf "$dir"
  return $rc
}
version=$(in_tmp -c 'import importlib.metadata as m; print(m.version("lerobot"))' 2>/dev/null) \
  || fail "$PY has no LeRobot; install LeRobot (0.6.x, or 0.4.x from 0.4.4) there first, or give its environment's python"
in_tmp -c "
import sys
v = tuple(int(p) for p in '$version'.split('.')[:3] if p.isdigit())
tested = (0, 6) <= v < (0, 7) or (0, 4, 4) <= v < (0, 5)
sys.exit(0 if tested and (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)" \
  || fail "LeRobot $version on Python $(in_tmp -c 'import platform; print(platform.python_version())'): the plugins are tested on LeRobot 0.6.x and 0.4.x from 0.4.4, on Python 3.10-3.12 (0.6 needs 3.12)"

pip_install() {
  # The machine's pip config may name local index folders that do not exist; hide that noise.
  "$PY" -m pip install --quiet --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2 || true)
}

echo "==> LeRobot $version in $(in_tmp -c 'import sys; print(sys.prefix)')"
if [[ $DRY_RUN == 1 ]]; then
  echo "dry run: nothing installed"
  exit 0
fi
if [[ $ROS_WHEELS == 1 ]]; then
  echo "==> ROS 2 runtime wheels"
  runtime=$(mktemp)
  sed '/^# Interface generation/,$d' "$ROOT/requirements/ros.txt" > "$runtime"
  pip_install -r "$runtime"
  rm -f "$runtime"
fi
echo "==> what LeRobot's scripts import beyond LeRobot (those missing here)"
lacking=$(in_tmp - "$ROOT/requirements/lerobot-plugins.txt" <<'EOF'
import importlib.metadata as m, sys
for line in open(sys.argv[1]):
    requirement = line.split("#")[0].strip()
    if requirement:
        try:
            m.version(requirement.split("==")[0])
        except m.PackageNotFoundError:
            print(requirement)
EOF
)
if [[ -n $lacking ]]; then
  mapfile -t lacking_list <<< "$lacking"
  pip_install --no-deps "${lacking_list[@]}"
fi
echo "==> project packages and plugins"
packages=(ros_ws/src/lerobot_contract ros_ws/src/lerobot_ros ros_ws/src/lerobot_policy_node training
  lerobot_plugins/lerobot_robot_ros lerobot_plugins/lerobot_teleoperator_ros lerobot_plugins/lerobot_camera_ros)
args=()
for p in "${packages[@]}"; do
  if [[ $EDITABLE == 1 ]]; then args+=(-e "$ROOT/$p"); else args+=("$ROOT/$p"); fi
done
pip_install --no-deps --no-build-isolation "${args[@]}"

echo "==> check: LeRobot finds --robot.type=ros, --teleop.type=ros and the ros camera"
in_tmp -c "
import rclpy, lerobot_robot_ros.core, lerobot_teleoperator_ros.core, lerobot_camera_ros.core, cv2, rerun
from lerobot.utils.import_utils import register_third_party_plugins
from lerobot.robots.config import RobotConfig
from lerobot.teleoperators.config import TeleoperatorConfig
from lerobot.cameras.configs import CameraConfig
register_third_party_plugins()
missing = [c.__name__ for c in (RobotConfig, TeleoperatorConfig, CameraConfig) if 'ros' not in c.get_known_choices()]
assert not missing, f'not registered: {missing}'" \
  || fail "the plugins do not load in $PY (the error is above); with a ROS 2 install, source it first and use --no-ros-wheels"
echo "installed: try lerobot-teleoperate --robot.type=ros --robot.contract=so101 --help"
