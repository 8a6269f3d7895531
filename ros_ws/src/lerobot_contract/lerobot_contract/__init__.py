"""The shared data model: the robot contract (topics, fields, joint order and units of every LeRobot feature,
DESIGN.md section 4), the frame-alignment rule (`align`), the live sampler (`sampler`) and the frame decoder
(`frames`). Pure Python (no rclpy); the recorder, the bag converter, the policy node and the sim bridge use it."""

from lerobot_contract.errors import (
    ClockJumpError,
    ContractError,
    MessageMismatchError,
    NonFiniteValueError,
    NonMonotonicStampError,
)
from lerobot_contract.schema import Contract, FeatureContract, load_contract, normalize_type, read_field
from lerobot_contract.time import NS
from lerobot_contract.units import JointUnits, UnitConverter

__all__ = [
    "NS",
    "ClockJumpError",
    "Contract",
    "ContractError",
    "FeatureContract",
    "JointUnits",
    "MessageMismatchError",
    "NonFiniteValueError",
    "NonMonotonicStampError",
    "UnitConverter",
    "load_contract",
    "normalize_type",
    "read_field",
]
