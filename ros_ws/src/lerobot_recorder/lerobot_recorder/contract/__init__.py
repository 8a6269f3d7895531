"""The robot contract: topics, fields, joint order and units of every LeRobot feature (DESIGN.md section 4)."""

from lerobot_recorder.contract.errors import ContractError, MessageMismatchError, NonFiniteValueError
from lerobot_recorder.contract.schema import Contract, FeatureContract, load_contract, normalize_type, read_field
from lerobot_recorder.contract.units import JointUnits, UnitConverter

__all__ = [
    "Contract",
    "ContractError",
    "FeatureContract",
    "JointUnits",
    "MessageMismatchError",
    "NonFiniteValueError",
    "UnitConverter",
    "load_contract",
    "normalize_type",
    "read_field",
]
