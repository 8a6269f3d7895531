"""One simulated servo: a control table in memory and simple position dynamics."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lerobot_drivers.motors.encoding import from_le_bytes, to_le_bytes
from lerobot_drivers.motors.tables import ModelInfo

Family = Literal["feetech", "dynamixel"]


@dataclass
class Dynamics:
    """The servo moves towards its goal at `max_speed` ticks/s with a first-order approach of `time_constant` s."""

    max_speed: float = 3000.0
    time_constant: float = 0.02


class FakeServo:
    """A servo's memory and motion.

    `physical` is the encoder angle in ticks before the homing offset. Feetech servos report
    `Present_Position = physical - Homing_Offset`; Dynamixel servos `physical + Homing_Offset`.
    """

    def __init__(
        self,
        motor_id: int,
        model: ModelInfo,
        family: Family,
        *,
        physical: float = 2048.0,
        baudrate_code: int = 0,
        dynamics: Dynamics | None = None,
        clock: Callable[[], float] = time.monotonic,
        model_number: int | None = None,
    ) -> None:
        self.model = model
        self.family = family
        self.dynamics = dynamics or Dynamics()
        self.memory = bytearray(256)
        self.physical = physical
        self.velocity = 0.0
        self.hardware_error = 0
        self._clock = clock
        self._last_update = clock()
        self._by_address = {reg.address: name for name, reg in model.control_table.items()}
        self.set("Model_Number", model.model_number if model_number is None else model_number)
        self.set("ID", motor_id)
        self.set("Baud_Rate", baudrate_code)
        self.set("Max_Position_Limit", model.resolution - 1)
        if family == "feetech":
            self.set("Present_Voltage", 74)  # 0.1 V
            self.set("Present_Temperature", 31)
            self.set("Response_Status_Level", 1)
            self.set("P_Coefficient", 32)
        else:
            self.set("Present_Input_Voltage", 50)  # 0.1 V
            self.set("Present_Temperature", 33)
            self.set("Operating_Mode", 3)
            self.set("Status_Return_Level", 2)
        self.set("Goal_Position", round(self.present_from_physical(physical)))
        self._refresh()

    @property
    def motor_id(self) -> int:
        return self.get("ID")

    def get(self, name: str) -> int:
        reg = self.model.register(name)
        return self.model.decode(name, from_le_bytes(bytes(self.memory[reg.address : reg.address + reg.size])))

    def set(self, name: str, value: int) -> None:
        reg = self.model.register(name)
        self.memory[reg.address : reg.address + reg.size] = to_le_bytes(self.model.encode(name, value), reg.size)

    def present_from_physical(self, physical: float) -> float:
        offset = self.get("Homing_Offset")
        return physical - offset if self.family == "feetech" else physical + offset

    def physical_from_present(self, present: float) -> float:
        offset = self.get("Homing_Offset")
        return present + offset if self.family == "feetech" else present - offset

    @property
    def torque_enabled(self) -> bool:
        return self.get("Torque_Enable") == 1

    def _limited_goal(self) -> float:
        goal = float(self.get("Goal_Position"))
        limits_apply = self.get("Operating_Mode") == (0 if self.family == "feetech" else 3)
        low, high = self.get("Min_Position_Limit"), self.get("Max_Position_Limit")
        if limits_apply and high > low:
            goal = min(max(goal, low), high)
        return self.physical_from_present(goal)

    def step(self) -> None:
        """Advance the motion to now."""
        now = self._clock()
        dt = max(0.0, now - self._last_update)
        self._last_update = now
        if self.torque_enabled and dt > 0:
            error = self._limited_goal() - self.physical
            dyn = self.dynamics
            rate = error / dyn.time_constant if dyn.time_constant > 0 else math.copysign(math.inf, error)
            rate = max(-dyn.max_speed, min(dyn.max_speed, rate))
            delta = rate * dt
            if abs(delta) > abs(error):
                delta = error
            self.physical += delta
            self.velocity = delta / dt
        else:
            self.velocity = 0.0
        self._refresh()

    def _refresh(self) -> None:
        present = round(self.present_from_physical(self.physical))
        if self.family == "feetech":
            self.set("Present_Position", max(-32767, min(32767, present)))
            self.set("Present_Velocity", max(-32767, min(32767, round(self.velocity))))
            load = 0 if not self.torque_enabled else round(max(-1000, min(1000, self.velocity / 3)))
            self.set("Present_Load", load)
            self.set("Moving", int(abs(self.velocity) > 1))
            self.set("Status", self.hardware_error)
        else:
            self.set("Present_Position", present)
            self.set("Present_Velocity", round(self.velocity * 60 / self.model.resolution / 0.229))
            effort = self.model.effort_register
            self.set(effort, 0 if not self.torque_enabled else round(max(-1000, min(1000, self.velocity / 3))))
            self.set("Moving", int(abs(self.velocity) > 1))
            self.set("Hardware_Error_Status", self.hardware_error)

    def read(self, address: int, length: int) -> bytes:
        self.step()
        return bytes(self.memory[address : address + length])

    def write(self, address: int, data: bytes) -> None:
        """Write memory; a Goal_Position or torque change takes effect from now."""
        self.step()
        if self.family == "dynamixel" and self.torque_enabled:
            # The X series locks its EEPROM area while torque is on.
            eeprom_end = 64
            if address < eeprom_end and address != self.model.register("Torque_Enable").address:
                return
        self.memory[address : address + len(data)] = data

    def move_by_hand(self, present: float) -> None:
        """Put the shaft where a hand would (only when torque is off), given in Present_Position ticks."""
        if self.torque_enabled:
            raise RuntimeError(f"servo {self.motor_id} holds its position (torque on); disable torque first")
        self.physical = self.physical_from_present(present)
        self.step()

    def register_name(self, address: int) -> str | None:
        return self._by_address.get(address)
