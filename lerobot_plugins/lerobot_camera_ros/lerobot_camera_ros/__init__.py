"""LeRobot camera plugin: camera type `ros`, a ROS 2 image topic.

LeRobot's scripts import this package because its distribution name starts with `lerobot_camera_`; importing it
registers `RosCameraConfig`. Without LeRobot installed only `core.TopicCamera` is available.
"""

from importlib.util import find_spec

__all__: list[str] = []

if find_spec("lerobot") is not None:
    from lerobot_camera_ros.config_ros import RosCameraConfig
    from lerobot_camera_ros.ros import RosCamera

    __all__ += ["RosCamera", "RosCameraConfig"]
