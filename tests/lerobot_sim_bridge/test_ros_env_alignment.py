"""RosRobotEnv's observation against the sim bridge is the step's own: every stream at the step's stamp.

Seen in bench/bench_parallel_eval.py: two lockstep evaluations of the same seeds through the bridge hashed
different observations (same targets) under load, because a camera frame still in flight when the joint states of
its step arrived was replaced by the previous step's frame (within `max_age_s`). The assembly is exercised here on
stored samples, without a graph: the frame of the step arrives after its joint states.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from builtin_interfaces.msg import Time as TimeMsg

from lerobot_contract import Contract
from lerobot_sim_bridge.ros_env import HISTORY, RosRobotEnv

REPO = Path(__file__).resolve().parents[2]
STATE, FRONT = "observation.state", "observation.images.front"


def _env(has_reset: bool) -> Any:
    """The assembly state of a RosRobotEnv (no node): joint states and front camera of the sim contract."""
    env: Any = RosRobotEnv.__new__(RosRobotEnv)
    env.contract = Contract.load(REPO / "config/contracts/so101_sim.yaml").select([STATE, FRONT, "action"])
    env._observations = {k: f for k, f in env.contract.features.items() if k.startswith("observation.")}
    env._history = {k: deque(maxlen=HISTORY) for k in env._observations}
    env._clock_key = STATE
    env._has_reset = has_reset
    return env


def _message(seconds: float, name: str) -> Any:
    return SimpleNamespace(header=SimpleNamespace(stamp=TimeMsg(sec=int(seconds), nanosec=round(seconds % 1 * 1e9))),
                           name=name)  # fmt: skip


def _deliver(env: Any, key: str, seconds: float) -> None:
    stamp = TimeMsg(sec=int(seconds), nanosec=round(seconds % 1 * 1e9))
    env._history[key].append((stamp.sec + stamp.nanosec * 1e-9, _message(seconds, f"{key}@{seconds}")))


def test_against_the_bridge_the_observation_waits_for_the_frame_of_its_step() -> None:
    env = _env(has_reset=True)
    _deliver(env, STATE, 1.0)
    _deliver(env, FRONT, 1.0)
    _deliver(env, STATE, 1.0 + 1 / 30)  # the next step's joint states; its frame is still in flight
    assert env._assemble(after=1.0) is None
    _deliver(env, FRONT, 1.0 + 1 / 30)
    found = env._assemble(after=1.0)
    assert found is not None and found[2][FRONT].name == f"{FRONT}@{1.0 + 1 / 30}"


def test_a_real_robot_keeps_the_newest_frame_within_its_age() -> None:
    env = _env(has_reset=False)  # no sim/reset: streams have their own stamps
    _deliver(env, STATE, 1.0)
    _deliver(env, FRONT, 1.0)
    _deliver(env, STATE, 1.0 + 1 / 30)
    found = env._assemble(after=1.0)
    assert found is not None and found[2][FRONT].name == f"{FRONT}@1.0"
