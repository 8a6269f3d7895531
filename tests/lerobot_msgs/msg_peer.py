"""Peer process for the lerobot_msgs round-trip tests.

`publish`: publishes one sample of every lerobot_msgs message type, repeatedly, on `/roundtrip/<Type>`.
`action_server`: serves `RecordEpisode` on `/record_episode`, sending 3 feedbacks and a result that
echoes the goal.
"""

from __future__ import annotations

import sys
import time

import rclpy
from builtin_interfaces.msg import Duration
from rclpy.action import ActionServer
from rclpy.executors import ExternalShutdownException

from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import ActionChunk, PolicyStatus, RecorderStatus


def samples() -> dict[str, object]:
    chunk = ActionChunk()
    chunk.header.stamp.sec = 1700000000
    chunk.header.stamp.nanosec = 123456789
    chunk.header.frame_id = "base"
    chunk.names = ["shoulder_pan", "gripper"]
    chunk.horizon = 3
    chunk.period = Duration(sec=0, nanosec=33_333_333)
    chunk.data = [0.5, -1.25, 1.0, 2.0, 3.5, -4.0]
    chunk.chunk_id = 2**40 + 7
    chunk.inference_time = 0.015625  # float32-exact
    chunk.policy = "act/so101"
    chunk.task = "stack the ‘blue’ cube"
    recorder = RecorderStatus(
        state=RecorderStatus.STATE_RECORDING,
        state_name="recording",
        dataset_root="/data/ds",
        repo_id="user/ds",
        task="pick the cube",
        episode_index=4,
        num_episodes=4,
        frames=120,
        dropped=2,
        elapsed_s=4.0,
    )
    policy = PolicyStatus(
        state="active",
        policy="act",
        device="cpu",
        chunks_published=10,
        last_inference_time=0.0625,
        mean_inference_time=0.03125,
        observation_age=0.0078125,
        stale_observations=1,
        task="stack the cube",
        last_chunk_task="pick the cube",
    )
    return {"ActionChunk": chunk, "RecorderStatus": recorder, "PolicyStatus": policy}


def publish() -> None:
    node = rclpy.create_node("msg_peer")
    msgs = samples()
    publishers = {name: node.create_publisher(type(msg), f"/roundtrip/{name}", 10) for name, msg in msgs.items()}
    node.create_timer(0.1, lambda: [publishers[name].publish(msg) for name, msg in msgs.items()])
    rclpy.spin(node)


def action_server() -> None:
    node = rclpy.create_node("record_episode_peer")

    def execute(goal_handle):  # type: ignore[no-untyped-def]
        for i in range(3):
            feedback = RecordEpisode.Feedback(frames=i * 10, dropped=i, elapsed_s=float(i))
            goal_handle.publish_feedback(feedback)
            time.sleep(0.05)
        goal_handle.succeed()
        return RecordEpisode.Result(
            saved=True,
            episode_index=7,
            path=f"/datasets/{goal_handle.request.task}",
            frames=int(goal_handle.request.duration_s * 30),
            dropped=0,
            message="ok",
        )

    ActionServer(node, RecordEpisode, "/record_episode", execute)
    rclpy.spin(node)


def main() -> int:
    rclpy.init()
    try:
        {"publish": publish, "action_server": action_server}[sys.argv[1]]()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
