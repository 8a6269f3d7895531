"""LeRobot robot plugin: `--robot.type=ros`, a ROS 2 robot described by a lerobot-ros contract.

LeRobot's scripts import this package because its distribution name starts with `lerobot_robot_`; importing it
registers `RosRobotConfig` (no ROS graph is joined before `connect()`). Without LeRobot installed only the ROS side
(`core.ContractRobot`, `link`, `features`) is available.
"""

from importlib.util import find_spec

__all__: list[str] = []

if find_spec("lerobot") is not None:
    from lerobot_robot_ros.config_ros import RosRobotConfig
    from lerobot_robot_ros.ros import RosRobot

    __all__ += ["RosRobot", "RosRobotConfig"]
