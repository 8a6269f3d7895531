"""A step's reward and episode end are the step's own, and a lost reset reply is retried (issue 18).

Seen under load: `RosRobotEnv.step` read reward, success and episode end from the bridge's unstamped `sim/...`
topics as soon as the step's observation was there. Those messages travel on other topics, so the env's executor
can hand them over after the observation: the episode's end was missed (the caller took one more step, and the
lockstep bridge, waiting for a reset, never answered: "no complete observation within 30 s"), and a step returned
the previous step's reward. The bridge now publishes a `lerobot_msgs/StepOutcome` stamped like each observation,
before it, and the env waits for the outcome of its observation's stamp.

Without a graph: a fake node routes every publish of the env to a scripted bridge and hands the bridge's messages
to the env's subscription callbacks by topic; the late messages (outcome and the old topics) are handed over only
once the env waits, or after its step returned (which is when the old env read them). Nothing here is timed.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import Pose, PoseArray
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64, String

from lerobot_contract import Contract
from lerobot_msgs.msg import StepOutcome
from lerobot_msgs.srv import ResetEnv
from lerobot_sim_bridge.ros_env import RosRobotEnv
from tests.lerobot_sim_bridge.conftest import in_process_bridge

REPO = Path(__file__).resolve().parents[2]
STATE, POSES = "observation.state", "observation.environment_state"
NS = "/follower"
DT = 1 / 30
HANG_GUARD_S = 60.0  # only ends a broken run; nothing here is timed


class WaitHookCondition(threading.Condition):
    """The env's lock; `on_wait` runs (once) when the env starts waiting for something that has not come."""

    on_wait: Callable[[], None] | None = None

    def wait(self, timeout: float | None = None) -> bool:
        hook, self.on_wait = self.on_wait, None
        if hook is not None:
            hook()
        return super().wait(timeout)


class Publisher:
    def __init__(self, on_publish: Callable[[Any], None]) -> None:
        self.publish = on_publish


class FakeNode:
    """What RosRobotEnv needs of an rclpy node; the bridge side is `ScriptedBridge`."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[Any], None]]] = defaultdict(list)
        self.bridge: ScriptedBridge | None = None

    def create_subscription(self, _type: Any, topic: str, callback: Callable[[Any], None], _qos: Any) -> object:
        self.callbacks[topic].append(callback)
        return object()

    def create_publisher(self, _type: Any, topic: str, _qos: Any) -> Publisher:
        assert topic == f"{NS}/joint_commands"
        return Publisher(self.bridge.on_command)  # type: ignore[union-attr]

    def create_client(self, _type: Any, name: str) -> Any:
        assert name == f"{NS}/sim/reset"
        return self.bridge

    def deliver(self, topic: str, msg: Any) -> None:
        for callback in self.callbacks[topic]:
            callback(msg)


def _stamp(seconds: float) -> TimeMsg:
    nanoseconds = round(seconds * 1e9)
    return TimeMsg(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


class ScriptedBridge:
    """A lockstep sim bridge in miniature: an episode of `length` steps, reward 0.1 * step; also `sim/reset`.

    With `late` the step's outcome and its unstamped reward/success/end arrive after its observation.
    `lose_replies` reset replies are lost; resets are idempotent by request id, as the real bridge's.
    """

    def __init__(self, node: FakeNode, length: int, late: bool) -> None:
        self.node, self.length, self.late = node, length, late
        node.bridge = self
        self.time = 0.0
        self.episode = -1
        self.steps = 0
        self.held: list[tuple[str, Any]] = []
        self.lose_replies = 0
        self.requests: list[ResetEnv.Request] = []
        self.answers: dict[int, ResetEnv.Response] = {}
        self.resets = 0

    def _observe(self, reward: float, end: str) -> None:
        stamp = _stamp(self.time)
        outcome = StepOutcome(episode_index=self.episode, step_index=self.steps, reward=reward, episode_end=end)
        outcome.header.stamp = stamp
        outcome.terminated = end in ("success", "terminated")
        outcome.truncated = end in ("truncated", "time_limit")
        signals = [(f"{NS}/sim/step_outcome", outcome)]
        if self.steps:
            signals += [(f"{NS}/sim/reward", Float64(data=reward)), (f"{NS}/sim/success", Bool(data=False))]
        if end:
            signals.append((f"{NS}/sim/episode_end", String(data=end)))
        poses = PoseArray(poses=[Pose(), Pose()])
        poses.header.stamp = stamp
        state = JointState(name=["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"])
        state.position = [0.0] * 6
        state.header.stamp = stamp
        observation = [(f"{NS}/sim/object_poses", poses), (f"{NS}/joint_states", state)]
        if self.late:
            self.held += signals
            signals = []
        for topic, msg in signals + observation:  # the bridge's order: outcome and signals first
            self.node.deliver(topic, msg)

    def release_held(self) -> None:
        held, self.held = self.held, []
        for topic, msg in held:
            self.node.deliver(topic, msg)

    def on_command(self, command: JointState) -> None:
        assert command.header.stamp == _stamp(self.time), "the command answers the newest observation"
        self.time += DT
        self.steps += 1
        self._observe(0.1 * self.steps, "time_limit" if self.steps >= self.length else "")

    # sim/reset, as an rclpy client sees it.

    def wait_for_service(self, timeout_sec: float | None = None) -> bool:
        return True

    @property
    def srv_name(self) -> str:
        return f"{NS}/sim/reset"

    def call_async(self, request: ResetEnv.Request) -> Future[ResetEnv.Response]:
        self.requests.append(request)
        future: Future[ResetEnv.Response] = Future()
        if request.request_id not in self.answers or not request.request_id:
            self.resets += 1
            self.time += DT
            self.episode += 1
            self.steps = 0
            response = ResetEnv.Response(success=True, seed=request.seed, episode_index=self.episode)
            response.stamp = _stamp(self.time)
            self.answers[request.request_id] = response
            self._observe(0.0, "")
        if self.lose_replies:
            self.lose_replies -= 1
            return future  # the reply never reaches the client
        future.set_result(self.answers[request.request_id])
        return future

    def remove_pending_request(self, future: Future[ResetEnv.Response]) -> None:
        pass


def _env(bridge_length: int, late: bool) -> tuple[Any, ScriptedBridge]:
    node = FakeNode()
    bridge = ScriptedBridge(node, bridge_length, late)
    contract = Contract.load(REPO / "config/contracts/so101_sim.yaml").select([STATE, POSES, "action"])
    env: Any = RosRobotEnv(contract, node=node, step_timeout=HANG_GUARD_S, discovery_timeout=HANG_GUARD_S)  # type: ignore[arg-type]
    env._lock = WaitHookCondition()
    return env, bridge


def test_an_outcome_arriving_after_its_observation_still_ends_the_episode_with_its_own_reward() -> None:
    env, bridge = _env(bridge_length=3, late=True)
    env._lock.on_wait = bridge.release_held
    env.reset(seed=1)
    bridge.release_held()
    returned = []
    for _ in range(3):
        env._lock.on_wait = bridge.release_held  # the outcome comes once the env waits for it
        _, reward, terminated, truncated, info = env.step(np.zeros(6))
        bridge.release_held()  # or after the step returned, which is when the old env read the old topics
        returned.append((round(reward, 6), terminated, truncated, info["episode_end"]))
    assert returned == [(0.1, False, False, ""), (0.2, False, False, ""), (0.3, False, True, "time_limit")]


def test_an_outcome_of_another_step_is_never_taken() -> None:
    env, bridge = _env(bridge_length=5, late=False)
    env.reset(seed=1)
    # A stale outcome (the reset observation's) is all there is when the step's observation comes without its own.
    bridge.late = True
    env._lock.on_wait = bridge.release_held
    _, reward, _, _, info = env.step(np.zeros(6))
    assert (round(reward, 6), info["step_index"]) == (0.1, 1)


def test_a_lost_reset_reply_is_sent_again_and_the_bridge_resets_once() -> None:
    env, bridge = _env(bridge_length=5, late=False)
    bridge.lose_replies = 1
    _, info = env.reset(seed=7)
    assert len(bridge.requests) == 2 and bridge.requests[0].request_id == bridge.requests[1].request_id != 0
    assert bridge.resets == 1 and info["episode_index"] == 0 and env.reset_retries == 1
    env.reset(seed=7)  # a new reset has a new id: it resets
    assert bridge.resets == 2 and bridge.requests[2].request_id != bridge.requests[0].request_id


@pytest.fixture
def bridge_node(ros_domain: int) -> Iterator[Any]:
    with in_process_bridge(ros_domain, max_episode_steps=2) as node:
        yield node


def test_the_bridge_publishes_each_outcome_before_its_observation_stamped_alike(bridge_node: Any) -> None:
    sent: list[tuple[str, Any]] = []
    bridge_node._outcome_pub.publish = lambda msg: sent.append(("outcome", msg))
    bridge_node._joint_states_pub.publish = lambda msg: sent.append(("joint_states", msg))
    stamps = []
    for _ in range(3):
        snap = bridge_node._step_once()
        bridge_node._publish(snap)
        stamps.append(snap.stamp)
    assert [kind for kind, _ in sent] == ["outcome", "joint_states"] * 3
    outcomes = [msg for kind, msg in sent if kind == "outcome"]
    assert [o.header.stamp for o in outcomes] == [m.header.stamp for k, m in sent if k == "joint_states"] == stamps
    assert [(o.step_index, o.episode_end, o.truncated) for o in outcomes] == [
        (1, "", False),
        (2, "time_limit", True),
        (3, "time_limit", True),  # an ended episode stays ended on later observations until a reset
    ]


def test_a_reset_sent_again_with_its_request_id_resets_once(bridge_node: Any) -> None:
    first = bridge_node._on_reset(ResetEnv.Request(use_seed=True, seed=5, request_id=42), ResetEnv.Response())
    again = bridge_node._on_reset(ResetEnv.Request(use_seed=True, seed=5, request_id=42), ResetEnv.Response())
    assert first.success and again == first and first.episode_index == 1
    other = bridge_node._on_reset(ResetEnv.Request(use_seed=True, seed=5, request_id=43), ResetEnv.Response())
    assert other.episode_index == 2
    unnamed = bridge_node._on_reset(ResetEnv.Request(use_seed=True, seed=5), ResetEnv.Response())
    assert unnamed.episode_index == 3
