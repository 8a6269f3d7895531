"""The live recorder's pure cores (no rclpy): frame sampling, the episode workflow, key mapping, bag recording.

The ROS shells live in `lerobot_recorder.nodes`.
"""

from lerobot_recorder.recorder.errors import RecorderError, TopicSelectionError, WorkflowError

__all__ = ["RecorderError", "TopicSelectionError", "WorkflowError"]
