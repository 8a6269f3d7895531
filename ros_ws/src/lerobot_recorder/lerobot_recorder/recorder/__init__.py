"""The live recorder's pure cores (no rclpy): frame sampling, the episode workflow, key mapping, bag recording.

The ROS shells live in `lerobot_recorder.nodes`.
"""

from lerobot_recorder.recorder.errors import ClockJumpError, RecorderError, TopicSelectionError, WorkflowError

__all__ = ["ClockJumpError", "RecorderError", "TopicSelectionError", "WorkflowError"]
