"""RosRobotEnv answers again an observation the lockstep bridge sends again (its action was lost; issue 18).

The lockstep bridge steps only on an answer to its newest observation and, while none came, re-sends that
observation every 0.5 s. An action published before the bridge's joint_commands subscription matched the env's
publisher (discovery on a loaded machine) is lost; the env ignored the re-sent observation (not newer than the
one it answered) and waited out its step timeout. Without a graph: the env's publisher is a list, the bridge's
messages are handed to the env's subscription callbacks from another thread.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg

from lerobot_contract import Contract
from lerobot_sim_bridge.ros_env import HISTORY, RosRobotEnv

REPO = Path(__file__).resolve().parents[2]
STATE, POSES = "observation.state", "observation.environment_state"
HANG_GUARD_S = 60.0  # only ends a broken run; nothing here is timed


class ListPublisher:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.changed = threading.Condition()

    def publish(self, msg: Any) -> None:
        with self.changed:
            self.sent.append(msg)
            self.changed.notify_all()

    def wait_for(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.sent) >= count, HANG_GUARD_S), f"{count} commands not sent"


def _env() -> Any:
    env: Any = RosRobotEnv.__new__(RosRobotEnv)
    env.contract = Contract.load(REPO / "config/contracts/so101_sim.yaml").select([STATE, POSES, "action"])
    features = env.contract.features
    env._action = features["action"]
    env._observations = {k: f for k, f in features.items() if k.startswith("observation.")}
    env._history = {k: deque(maxlen=HISTORY) for k in env._observations}
    env._clock_key = STATE
    env._has_reset = True
    env._lock = threading.Condition()
    env.step_timeout = HANG_GUARD_S
    env._outcomes = deque(maxlen=HISTORY)
    env._pending_command, env._resend, env.resent_commands = None, False, 0
    env._command_pub = ListPublisher()
    return env


def _stamp(seconds: float) -> TimeMsg:
    return TimeMsg(sec=int(seconds), nanosec=round(seconds % 1 * 1e9))


def _observe(env: Any, seconds: float) -> None:
    """What the bridge publishes for one step (outcome first, joint states last), through the env's callbacks."""
    poses = SimpleNamespace(header=SimpleNamespace(stamp=_stamp(seconds)), poses=[])
    for _ in range(2):
        poses.poses.append(SimpleNamespace(position=SimpleNamespace(x=0.1, y=0.2, z=0.0)))
    state = SimpleNamespace(
        header=SimpleNamespace(stamp=_stamp(seconds)), name=list(env._action.joints), position=[0.0] * 6
    )
    outcome = SimpleNamespace(
        header=SimpleNamespace(stamp=_stamp(seconds)), reward=0.0, success=False, terminated=False, truncated=False,
        episode_end="", episode_index=0, step_index=0,
    )  # fmt: skip
    env._on_outcome(outcome)  # the step's outcome goes out before its observation
    env._store(POSES)(poses)
    env._store(STATE)(state)


def test_a_lost_action_is_sent_again_when_the_bridge_sends_its_observation_again() -> None:
    env = _env()
    _observe(env, 1.0)
    env._last_stamp = _stamp(1.0)  # the env returned the observation of t=1.0
    result: dict[str, Any] = {}
    stepping = threading.Thread(target=lambda: result.update(out=env.step(np.zeros(6))), daemon=True)
    stepping.start()
    env._command_pub.wait_for(1)  # this one is lost: the bridge never steps on it
    _observe(env, 1.0)  # the bridge, still waiting for an answer, sends t=1.0 again
    env._command_pub.wait_for(2)
    first, again = env._command_pub.sent
    assert again.header.stamp == first.header.stamp == _stamp(1.0)
    assert list(again.position) == list(first.position)
    _observe(env, 1.0 + 1 / 30)  # the answer came through: the bridge steps
    stepping.join(HANG_GUARD_S)
    assert not stepping.is_alive() and "out" in result
    assert env.resent_commands == 1 and len(env._command_pub.sent) == 2
    assert env._last_stamp == _stamp(1.0 + 1 / 30)
