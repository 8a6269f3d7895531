"""LeRobot teleoperator plugin: `--teleop.type=ros`, a leader arm's ROS 2 JointState topic through a contract.

LeRobot's scripts import this package because its distribution name starts with `lerobot_teleoperator_`; importing
it registers `RosTeleoperatorConfig`. Without LeRobot installed only `core.ContractLeader` is available.
"""

from importlib.util import find_spec

__all__: list[str] = []

if find_spec("lerobot") is not None:
    from lerobot_teleoperator_ros.config_ros import RosTeleoperatorConfig
    from lerobot_teleoperator_ros.ros import RosTeleoperator

    __all__ += ["RosTeleoperator", "RosTeleoperatorConfig"]
