"""Dynamixel X-series control table (XL330-M077/M288, XL430-W250), baud-rate codes and encodings.

Source: ROBOTIS e-manual control tables; names follow LeRobot's `motors/dynamixel/tables.py`.
"""

from __future__ import annotations

import math

from lerobot_drivers.motors.encoding import SignEncoding
from lerobot_drivers.motors.tables import ModelInfo, table

X_SERIES_CONTROL_TABLE = table(
    {
        "Model_Number": (0, 2),
        "Model_Information": (2, 4),
        "Firmware_Version": (6, 1),
        "ID": (7, 1),
        "Baud_Rate": (8, 1),
        "Return_Delay_Time": (9, 1),
        "Drive_Mode": (10, 1),
        "Operating_Mode": (11, 1),
        "Secondary_ID": (12, 1),
        "Protocol_Type": (13, 1),
        "Homing_Offset": (20, 4),
        "Moving_Threshold": (24, 4),
        "Temperature_Limit": (31, 1),
        "Max_Voltage_Limit": (32, 2),
        "Min_Voltage_Limit": (34, 2),
        "PWM_Limit": (36, 2),
        "Current_Limit": (38, 2),
        "Acceleration_Limit": (40, 4),
        "Velocity_Limit": (44, 4),
        "Max_Position_Limit": (48, 4),
        "Min_Position_Limit": (52, 4),
        "Shutdown": (63, 1),
        "Torque_Enable": (64, 1),
        "LED": (65, 1),
        "Status_Return_Level": (68, 1),
        "Registered_Instruction": (69, 1),
        "Hardware_Error_Status": (70, 1),
        "Velocity_I_Gain": (76, 2),
        "Velocity_P_Gain": (78, 2),
        "Position_D_Gain": (80, 2),
        "Position_I_Gain": (82, 2),
        "Position_P_Gain": (84, 2),
        "Feedforward_2nd_Gain": (88, 2),
        "Feedforward_1st_Gain": (90, 2),
        "Bus_Watchdog": (98, 1),
        "Goal_PWM": (100, 2),
        "Goal_Current": (102, 2),
        "Goal_Velocity": (104, 4),
        "Profile_Acceleration": (108, 4),
        "Profile_Velocity": (112, 4),
        "Goal_Position": (116, 4),
        "Realtime_Tick": (120, 2),
        "Moving": (122, 1),
        "Moving_Status": (123, 1),
        "Present_PWM": (124, 2),
        "Present_Current": (126, 2),
        "Present_Velocity": (128, 4),
        "Present_Position": (132, 4),
        "Velocity_Trajectory": (136, 4),
        "Position_Trajectory": (140, 4),
        "Present_Input_Voltage": (144, 2),
        "Present_Temperature": (146, 1),
    }
)

# XL430 has no current sensor: address 126 is Present_Load (0.1 %) and 38 is unused.
XL430_CONTROL_TABLE = {
    **{
        k: v for k, v in X_SERIES_CONTROL_TABLE.items() if k not in ("Present_Current", "Current_Limit", "Goal_Current")
    },
    "Present_Load": X_SERIES_CONTROL_TABLE["Present_Current"],
}

_TWOS = SignEncoding("twos_complement")
X_SERIES_ENCODINGS = {
    name: _TWOS
    for name in (
        "Homing_Offset",
        "Goal_PWM",
        "Goal_Current",
        "Goal_Velocity",
        "Present_PWM",
        "Present_Current",
        "Present_Load",
        "Present_Velocity",
        "Present_Position",
        "Goal_Position",
        "Min_Position_Limit",
        "Max_Position_Limit",
    )
}

X_SERIES_BAUDRATES = {
    9_600: 0,
    57_600: 1,
    115_200: 2,
    1_000_000: 3,
    2_000_000: 4,
    3_000_000: 5,
    4_000_000: 6,
}

_VELOCITY_UNIT = 0.229 * 2 * math.pi / 60  # 0.229 rev/min per tick


def _x_series(name: str, model_number: int, modes: tuple[int, ...], effort: str) -> ModelInfo:
    control_table = XL430_CONTROL_TABLE if effort == "Present_Load" else X_SERIES_CONTROL_TABLE
    return ModelInfo(
        name=name,
        model_number=model_number,
        resolution=4096,
        control_table=control_table,
        encodings=X_SERIES_ENCODINGS,
        baudrates=X_SERIES_BAUDRATES,
        velocity_unit_rad_s=_VELOCITY_UNIT,
        effort_register=effort,
        operating_modes=modes,
    )


XL330_M077 = _x_series("xl330-m077", 1190, (0, 1, 3, 4, 5, 16), "Present_Current")
XL330_M288 = _x_series("xl330-m288", 1200, (0, 1, 3, 4, 5, 16), "Present_Current")
XL430_W250 = _x_series("xl430-w250", 1060, (1, 3, 4, 16), "Present_Load")

MODELS: dict[str, ModelInfo] = {m.name: m for m in (XL330_M077, XL330_M288, XL430_W250)}

# Operating_Mode values.
MODE_POSITION = 3
MODE_EXTENDED_POSITION = 4
MODE_CURRENT_POSITION = 5

# Instructions of protocol 2.0.
PING = 0x01
READ = 0x02
WRITE = 0x03
STATUS = 0x55
SYNC_READ = 0x82
SYNC_WRITE = 0x83
BROADCAST_ID = 0xFE

# Status packet error byte: bit 7 = hardware alert (details in Hardware_Error_Status), bits 0-6 = result.
ALERT_BIT = 0x80
RESULT_ERRORS = {
    1: "result fail",
    2: "instruction error",
    3: "CRC error",
    4: "data range error",
    5: "data length error",
    6: "data limit error",
    7: "access error",
}
HARDWARE_ERROR_BITS = {
    0x01: "input voltage",
    0x04: "overheating",
    0x08: "motor encoder",
    0x10: "electrical shock",
    0x20: "overload",
}


def describe_status(error: int) -> str:
    """Human-readable meaning of a Dynamixel status error byte."""
    parts = []
    if error & ALERT_BIT:
        parts.append("hardware alert")
    result = error & 0x7F
    if result:
        parts.append(RESULT_ERRORS.get(result, f"result 0x{result:02x}"))
    return ", ".join(parts)


def describe_hardware_error(bits: int) -> str:
    """Human-readable names of the bits set in Hardware_Error_Status."""
    return ", ".join(name for bit, name in HARDWARE_ERROR_BITS.items() if bits & bit)
