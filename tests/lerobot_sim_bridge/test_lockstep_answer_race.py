"""A lockstep step answered before the bridge's worker thread ran again still steps (issue 18).

Seen under load (4 busy loops on 2 cores): `lerobot-ros eval` through the lockstep bridge stopped after a few
episodes with "no complete observation within 30 s". The bridge recorded in its lockstep gate that it had
published an observation only after the last message (joint_states) went out; a controller that answered those
joint states before the worker thread got the CPU back had its answer counted for the previous observation, then
overwritten as "not answered yet": the bridge waited forever for a command that had come, and the controller for
an observation that would never come. Injected here without a graph: the joint_states publisher hands the state
straight to the bridge's own command callback, as the fastest controller would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sensor_msgs.msg import JointState

from tests.lerobot_sim_bridge.conftest import in_process_bridge


@pytest.fixture
def bridge(ros_domain: int) -> Iterator[Any]:
    with in_process_bridge(ros_domain) as node:
        yield node


def test_an_answer_to_the_joint_states_before_the_worker_runs_again_lets_the_bridge_step(bridge: Any) -> None:
    answered: list[JointState] = []

    def answer_at_once(state: JointState) -> None:
        command = JointState(name=list(state.name), position=list(state.position))
        command.header.stamp = state.header.stamp  # answers this very observation, as RosRobotEnv does
        answered.append(command)
        bridge._on_joint_commands(command)

    bridge._joint_states_pub.publish = answer_at_once
    for _ in range(3):
        snap = bridge._step_once()  # one control period on: a stamp after 0 (0 is "unstamped")
        bridge._publish(snap)
        assert answered[-1].header.stamp == snap.stamp
        assert bridge._gate.ready(time.monotonic()), "the answer that came was forgotten: the step would wait forever"
    assert bridge._gate.timeouts == 0
