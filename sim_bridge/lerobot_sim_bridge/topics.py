"""What the bridge publishes and accepts, as plain data: names relative to the arm namespace, types, QoS.

The arm topics are the real arm driver's (`lerobot_drivers` `arm_driver`): same names, types, units
(radians, rad/s) and reliability, so a consumer cannot tell the simulated arm from a real one.
Camera topics are global (`/cameras/<name>/...`), like the camera drivers'. `sim/...` topics and
services exist only in simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

JOINT_STATES = "joint_states"
JOINT_COMMANDS = "joint_commands"
JOINT_TRAJECTORY = "joint_trajectory"
CLOCK = "/clock"
SIM_REWARD = "sim/reward"
SIM_SUCCESS = "sim/success"
SIM_EPISODE_END = "sim/episode_end"
# Reward, success and episode end of one step, stamped like that step's observation (lerobot_msgs/StepOutcome).
SIM_STEP_OUTCOME = "sim/step_outcome"
SIM_OBJECT_POSES = "sim/object_poses"
DIAGNOSTICS = "/diagnostics"
SIM_RESET = "sim/reset"
SIM_GET_SUCCESS = "sim/get_success"

# Reliable, keep-last depth; the arm driver uses the same for joint_states and for commands.
STATE_QOS_DEPTH = 10
COMMAND_QOS_DEPTH = 10
# Step outcomes: latched with the state depth, so a consumer that matched after a step still gets its outcome.
OUTCOME_QOS_DEPTH = 10
# Images: reliable so both reliable and best-effort subscribers match; a shallow queue so a slow
# subscriber gets the newest frames rather than a backlog.
IMAGE_QOS_DEPTH = 2


def image_topic(camera: str) -> str:
    """Raw image topic of `camera`."""
    return f"/cameras/{camera}/image_raw"


def camera_info_topic(camera: str) -> str:
    """Camera info topic of `camera`."""
    return f"/cameras/{camera}/camera_info"


def camera_frame_id(camera: str) -> str:
    """The optical frame images of `camera` are stamped in (REP 103 optical convention)."""
    return f"{camera}_camera_optical_frame"


@dataclass(frozen=True)
class TopicSpec:
    """One topic of the bridge: name (relative names resolve in the arm namespace), type, direction, units."""

    name: str
    type: str
    direction: str  # "publish" or "subscribe"
    units: str = ""


ARM_TOPICS = (
    TopicSpec(JOINT_STATES, "sensor_msgs/msg/JointState", "publish", "position rad, velocity rad/s, effort N*m"),
    TopicSpec(JOINT_COMMANDS, "sensor_msgs/msg/JointState", "subscribe", "position rad"),
    TopicSpec(JOINT_TRAJECTORY, "trajectory_msgs/msg/JointTrajectory", "subscribe", "position rad, time s"),
)

SIM_TOPICS = (
    TopicSpec(CLOCK, "rosgraph_msgs/msg/Clock", "publish", "s"),
    TopicSpec(SIM_REWARD, "std_msgs/msg/Float64", "publish"),
    TopicSpec(SIM_SUCCESS, "std_msgs/msg/Bool", "publish"),
    TopicSpec(SIM_EPISODE_END, "std_msgs/msg/String", "publish"),
    TopicSpec(SIM_STEP_OUTCOME, "lerobot_msgs/msg/StepOutcome", "publish", "stamp = the observation's"),
    TopicSpec(SIM_OBJECT_POSES, "geometry_msgs/msg/PoseArray", "publish", "m (env units for 2-D envs)"),
    TopicSpec(DIAGNOSTICS, "diagnostic_msgs/msg/DiagnosticArray", "publish", "real-time factor, rejects"),
)


def camera_topics(camera: str) -> tuple[TopicSpec, ...]:
    """The topics published for one camera."""
    return (
        TopicSpec(image_topic(camera), "sensor_msgs/msg/Image", "publish", "rgb8"),
        TopicSpec(camera_info_topic(camera), "sensor_msgs/msg/CameraInfo", "publish", "pixels"),
    )
