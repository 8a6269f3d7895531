"""Feetech STS/SMS control table (STS3215), baud-rate codes, sign encodings and status bits.

Source: Feetech STS/SMS memory table (FT-SMS-STS e-manual); names follow LeRobot's `motors/feetech/tables.py`
so that register names mean the same thing in both projects.
"""

from __future__ import annotations

import math

from lerobot_drivers.motors.encoding import SignEncoding
from lerobot_drivers.motors.tables import ModelInfo, table

STS_CONTROL_TABLE = table(
    {
        # EPROM
        "Firmware_Major_Version": (0, 1),
        "Firmware_Minor_Version": (1, 1),
        "Model_Number": (3, 2),
        "ID": (5, 1),
        "Baud_Rate": (6, 1),
        "Return_Delay_Time": (7, 1),
        "Response_Status_Level": (8, 1),
        "Min_Position_Limit": (9, 2),
        "Max_Position_Limit": (11, 2),
        "Max_Temperature_Limit": (13, 1),
        "Max_Voltage_Limit": (14, 1),
        "Min_Voltage_Limit": (15, 1),
        "Max_Torque_Limit": (16, 2),
        "Phase": (18, 1),
        "Unloading_Condition": (19, 1),
        "LED_Alarm_Condition": (20, 1),
        "P_Coefficient": (21, 1),
        "D_Coefficient": (22, 1),
        "I_Coefficient": (23, 1),
        "Minimum_Startup_Force": (24, 2),
        "CW_Dead_Zone": (26, 1),
        "CCW_Dead_Zone": (27, 1),
        "Protection_Current": (28, 2),
        "Angular_Resolution": (30, 1),
        "Homing_Offset": (31, 2),
        "Operating_Mode": (33, 1),
        "Protective_Torque": (34, 1),
        "Protection_Time": (35, 1),
        "Overload_Torque": (36, 1),
        "Velocity_closed_loop_P_proportional_coefficient": (37, 1),
        "Over_Current_Protection_Time": (38, 1),
        "Velocity_closed_loop_I_integral_coefficient": (39, 1),
        # SRAM
        "Torque_Enable": (40, 1),
        "Acceleration": (41, 1),
        "Goal_Position": (42, 2),
        "Goal_Time": (44, 2),
        "Goal_Velocity": (46, 2),
        "Torque_Limit": (48, 2),
        "Lock": (55, 1),
        "Present_Position": (56, 2),
        "Present_Velocity": (58, 2),
        "Present_Load": (60, 2),
        "Present_Voltage": (62, 1),
        "Present_Temperature": (63, 1),
        "Status": (65, 1),
        "Moving": (66, 1),
        "Present_Current": (69, 2),
        # Factory
        "Maximum_Acceleration": (85, 1),
    }
)

# Sign-magnitude: the servo keeps the magnitude in the low bits and the direction in one bit.
STS_ENCODINGS = {
    "Homing_Offset": SignEncoding("sign_magnitude", 11),
    "Goal_Position": SignEncoding("sign_magnitude", 15),
    "Present_Position": SignEncoding("sign_magnitude", 15),
    "Goal_Velocity": SignEncoding("sign_magnitude", 15),
    "Present_Velocity": SignEncoding("sign_magnitude", 15),
    "Present_Load": SignEncoding("sign_magnitude", 10),
}

STS_BAUDRATES = {
    1_000_000: 0,
    500_000: 1,
    250_000: 2,
    128_000: 3,
    115_200: 4,
    57_600: 5,
    38_400: 6,
    19_200: 7,
}

STS3215 = ModelInfo(
    name="sts3215",
    model_number=777,
    resolution=4096,
    control_table=STS_CONTROL_TABLE,
    encodings=STS_ENCODINGS,
    baudrates=STS_BAUDRATES,
    velocity_unit_rad_s=2 * math.pi / 4096,  # 1 step/s
    effort_register="Present_Load",  # 0.1 % of the maximum torque
    operating_modes=(0, 1, 2, 3),
)

MODELS: dict[str, ModelInfo] = {STS3215.name: STS3215}

# Operating_Mode values.
MODE_POSITION = 0

# Bits of the error byte of a status packet (and of the Status register).
STATUS_BITS = {
    0x01: "input voltage",
    0x02: "angle sensor",
    0x04: "overheat",
    0x08: "overcurrent",
    0x20: "overload",
}

# Instructions of protocol 0.
PING = 0x01
READ = 0x02
WRITE = 0x03
SYNC_READ = 0x82
SYNC_WRITE = 0x83
BROADCAST_ID = 0xFE


def describe_status(error: int) -> str:
    """Human-readable names of the bits set in a Feetech status error byte."""
    names = [name for bit, name in STATUS_BITS.items() if error & bit]
    unknown = error & ~sum(STATUS_BITS)
    if unknown:
        names.append(f"unknown bits 0x{unknown:02x}")
    return ", ".join(names)
