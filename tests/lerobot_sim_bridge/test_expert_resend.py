"""The scripted expert answers an observation the lockstep bridge sent again (its first answer was lost).

Issue 18 #7: under load `test_lockstep_with_the_expert...` hung until its 120 s timeout. The bridge's
joint_commands subscription matched the expert's publisher only after the expert's first answer went out
(discovery on a busy machine), so that answer was lost; the bridge re-sent the observation every 0.5 s, and the
expert ignored it as "already answered": the lockstep waited forever.
"""

from __future__ import annotations

import rclpy
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose, PoseArray
from rclpy.context import Context
from sensor_msgs.msg import JointState

from lerobot_sim_bridge.nodes.expert import ScriptedExpertNode, _State


def observation(node: ScriptedExpertNode, stamp: Time) -> tuple[JointState, PoseArray]:
    expert = node._expert
    state = JointState(name=list(expert.joint_names), position=[0.0] * len(expert.joint_names))
    state.header.stamp = stamp
    poses = PoseArray(poses=[Pose() for _ in expert.object_names])
    poses.header.stamp = stamp
    for pose in poses.poses:
        pose.orientation.w = 1.0
    return state, poses


def test_an_observation_sent_again_is_answered_again_with_the_same_command():
    context = Context()
    rclpy.init(context=context, domain_id=0)
    try:
        node = ScriptedExpertNode(context=context)
        sent: list[JointState] = []
        node._commands_pub.publish = sent.append  # what the bridge would receive
        node._state = _State.ACTIVE
        node._episode_start = 1.0
        state, poses = observation(node, Time(sec=2, nanosec=0))
        node._on_poses(poses)
        node._on_joint_states(state)
        assert len(sent) == 1
        again, _ = observation(node, Time(sec=2, nanosec=0))  # the bridge re-sends the same observation
        node._on_joint_states(again)
        assert len(sent) == 2
        assert sent[1].header.stamp == sent[0].header.stamp
        assert list(sent[1].position) == list(sent[0].position)
        older, _ = observation(node, Time(sec=1, nanosec=500_000_000))
        node._on_joint_states(older)
        assert len(sent) == 2  # an older observation is still not answered
        node.destroy_node()
    finally:
        context.try_shutdown()
