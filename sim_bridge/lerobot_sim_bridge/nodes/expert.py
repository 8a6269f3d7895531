"""The scripted expert node: a teleoperator in code that drives a (simulated) arm like a leader arm.

For each episode it calls the bridge's `sim/reset` with the next seed (objects are placed at random per
seed), then answers every `joint_states` with a `joint_commands` message stamped like that observation
(so a lockstep bridge steps deterministically), until the bridge reports `sim/episode_end`; `pause_s` later
it starts the next episode (a recorder saves the last one meanwhile). It logs one line per episode and, with
`episodes > 0`, a success summary before it exits.
"""

from __future__ import annotations

import enum
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from rclpy.time import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String

from lerobot_msgs.srv import ResetEnv
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_node
from lerobot_sim_bridge import topics
from lerobot_sim_bridge.adapters.base import ObjectPose
from lerobot_sim_bridge.errors import SimBridgeError
from lerobot_sim_bridge.experts.base import ScriptedExpert, make_expert

STATE_QOS = QoSProfile(depth=topics.STATE_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=topics.COMMAND_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
POSE_CACHE = 8


class _State(enum.Enum):
    WAITING = "waiting for the bridge"
    RESETTING = "resetting"
    ACTIVE = "in an episode"
    FINISHED = "finished"


def _seconds(stamp: Any) -> float:
    return float(Time.from_msg(stamp).nanoseconds) * 1e-9


@dataclass(frozen=True)
class ScriptedExpertParameters:
    """The scripted expert's parameters, all read-only (README: `python -m lerobot_ros.node_kit markdown <this>`)."""

    env_id: str = param("so101_pick_place", "environment the bridge runs (selects the expert)")
    episodes: int = param(0, "episodes to run before exiting; 0 = run forever", low=0, high=10**9)
    seed: int = param(0, "seed of the first episode; episode i uses seed + i")
    hold_ticks: int = param(
        1, "observations each SO-101 expert target is held (1 = a new target for every observation)", low=1, high=100
    )
    pause_s: float = param(
        0.0,
        "wall seconds between the end of an episode and the next reset (time for a recorder to save it)",
        low=0.0,
        high=3600.0,
    )


class ScriptedExpertNode(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("scripted_expert", **kwargs)

        self.params = declare_parameters(self, ScriptedExpertParameters)
        self._pause_s = float(self.params.config.pause_s)
        self._resume_at = 0.0
        self._expert: ScriptedExpert = make_expert(str(self.params.config.env_id), int(self.params.config.hold_ticks))
        self._episodes = int(self.params.config.episodes)
        self._first_seed = int(self.params.config.seed)
        self._index = 0
        self._results: list[tuple[int, str, int]] = []
        self._state = _State.WAITING
        self._episode_start = 0.0
        self._last_answered = -1.0
        self._last_command: JointState | None = None
        self._ticks = 0
        self._poses: OrderedDict[float, dict[str, ObjectPose]] = OrderedDict()
        self._pending: JointState | None = None
        self._reset_future: Future | None = None

        self._commands_pub = self.create_publisher(JointState, topics.JOINT_COMMANDS, COMMAND_QOS)
        self._active_pub = self.create_publisher(Bool, "~/episode_active", LATCHED_QOS)
        self.create_subscription(JointState, topics.JOINT_STATES, self._on_joint_states, STATE_QOS)
        self.create_subscription(PoseArray, topics.SIM_OBJECT_POSES, self._on_poses, STATE_QOS)
        self.create_subscription(String, topics.SIM_EPISODE_END, self._on_episode_end, LATCHED_QOS)
        self._reset_client = self.create_client(ResetEnv, topics.SIM_RESET)
        self.create_timer(0.1, self._tick)
        self._active_pub.publish(Bool(data=False))
        self.get_logger().info(
            f"scripted expert for {self.params.config.env_id}: {self._episodes or 'unlimited'} episodes from seed "
            f"{self._first_seed}; waiting for {self._reset_client.srv_name}"
        )

    @property
    def finished(self) -> bool:
        """Whether all requested episodes have run."""
        return self._state is _State.FINISHED

    @property
    def successes(self) -> int:
        """Episodes that ended in success so far."""
        return sum(1 for _, reason, _ in self._results if reason == "success")

    def _tick(self) -> None:
        if (
            self._state is _State.WAITING
            and time.monotonic() >= self._resume_at
            and self._reset_client.service_is_ready()
        ):
            request = ResetEnv.Request(use_seed=True, seed=self._first_seed + self._index)
            self._state = _State.RESETTING
            self._reset_future = self._reset_client.call_async(request)
            self._reset_future.add_done_callback(self._on_reset_done)

    def _on_reset_done(self, future: Future) -> None:
        response = future.result()
        if response is None or not response.success:
            reason = "no response" if response is None else response.message
            self.get_logger().error(f"reset for episode {self._index} failed: {reason}; retrying")
            self._state = _State.WAITING
            return
        self._episode_start = _seconds(response.stamp)
        self._expert.reset()
        self._ticks = 0
        self._state = _State.ACTIVE
        self._active_pub.publish(Bool(data=True))
        self.get_logger().info(f"episode {self._index} started (seed {response.seed})")
        if self._pending is not None:
            self._try_act(self._pending)

    def _on_poses(self, msg: PoseArray) -> None:
        names = self._expert.object_names
        if len(msg.poses) != len(names):
            self.get_logger().warning(
                f"sim/object_poses has {len(msg.poses)} poses, expected {len(names)} ({', '.join(names)})",
                throttle_duration_sec=1.0,
            )
            return
        poses = {
            name: ObjectPose(
                name,
                (p.position.x, p.position.y, p.position.z),
                (p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z),
            )
            for name, p in zip(names, msg.poses, strict=True)
        }
        self._poses[_seconds(msg.header.stamp)] = poses
        while len(self._poses) > POSE_CACHE:
            self._poses.popitem(last=False)
        if self._pending is not None:
            self._try_act(self._pending)

    def _on_joint_states(self, msg: JointState) -> None:
        self._try_act(msg)

    def _try_act(self, msg: JointState) -> None:
        """Answer `msg` once the object poses with its stamp are known (exact pairing keeps lockstep exact)."""
        self._pending = msg
        if self._state is not _State.ACTIVE:
            return
        stamp = _seconds(msg.header.stamp)
        if stamp == self._last_answered and self._last_command is not None:
            # The bridge sent this observation again: it is still waiting, so our answer did not reach it (on a
            # busy machine the bridge's subscription can match our publisher after the answer went out). Send
            # the same command again; the lockstep would otherwise wait forever.
            self._pending = None
            self._commands_pub.publish(self._last_command)
            return
        if stamp < self._episode_start - 1e-9 or stamp < self._last_answered:
            # Before this episode, or older than what was answered already.
            self._pending = None
            return
        poses = self._poses.get(stamp)
        if poses is None:
            return
        self._pending = None
        index = {name: i for i, name in enumerate(msg.name)}
        try:
            positions = np.array([msg.position[index[name]] for name in self._expert.joint_names])
            targets = self._expert.act(positions, poses)
        except KeyError as err:
            self.get_logger().warning(f"joint_states lacks joint {err}; not commanding", throttle_duration_sec=1.0)
            return
        except SimBridgeError as err:
            self.get_logger().warning(f"expert cannot act: {err}", throttle_duration_sec=1.0)
            return
        command = JointState()
        command.header.stamp = msg.header.stamp
        command.name = list(self._expert.joint_names)
        command.position = [float(x) for x in targets]
        self._commands_pub.publish(command)
        self._last_answered = stamp
        self._last_command = command
        self._ticks += 1

    def _on_episode_end(self, msg: String) -> None:
        if self._state is not _State.ACTIVE:
            return
        seed = self._first_seed + self._index
        self._results.append((seed, msg.data, self._ticks))
        self._active_pub.publish(Bool(data=False))
        self.get_logger().info(
            f"episode {self._index} (seed {seed}): {msg.data} after {self._ticks} commands; "
            f"{self.successes}/{len(self._results)} successful so far"
        )
        self._index += 1
        if self._episodes and self._index >= self._episodes:
            self._state = _State.FINISHED
            self.get_logger().info(
                f"scripted expert done: {self.successes}/{len(self._results)} episodes successful "
                f"(seeds {self._first_seed}..{self._first_seed + len(self._results) - 1})"
            )
        else:
            self._state = _State.WAITING
            self._resume_at = time.monotonic() + self._pause_s


def main(args: list[str] | None = None) -> int:
    """Console script `scripted_expert`."""
    return run_node(
        ScriptedExpertNode,
        "scripted_expert",
        args=args,
        finished=lambda node: 0 if node.finished else None,
        startup_errors=(SimBridgeError,),
        what="the scripted expert",
    )


if __name__ == "__main__":
    sys.exit(main())
