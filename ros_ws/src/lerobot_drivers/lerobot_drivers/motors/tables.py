"""What a bus needs to know about one servo model: its registers, encodings, resolution and baud rates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lerobot_drivers.motors.encoding import SignEncoding


@dataclass(frozen=True)
class Register:
    """One control-table entry."""

    address: int
    size: int


@dataclass(frozen=True)
class ModelInfo:
    """A servo model: control table, model number reported by PING, encoder resolution, baud-rate codes.

    `velocity_unit_rad_s` converts Present_Velocity ticks to rad/s; `effort_register` names the register
    published as effort (its unit is the servo's: 0.1 % of max torque for Feetech load, mA for XL330 current).
    """

    name: str
    model_number: int
    resolution: int
    control_table: Mapping[str, Register]
    encodings: Mapping[str, SignEncoding]
    baudrates: Mapping[int, int]
    velocity_unit_rad_s: float
    effort_register: str
    operating_modes: tuple[int, ...] = field(default=())

    def register(self, name: str) -> Register:
        """The register called `name`; KeyError names the model and the known registers."""
        try:
            return self.control_table[name]
        except KeyError:
            raise KeyError(
                f"model {self.name} has no register {name!r}; known: {', '.join(sorted(self.control_table))}"
            ) from None

    def decode(self, name: str, raw: int) -> int:
        """Signed value of register `name` from its unsigned wire value."""
        encoding = self.encodings.get(name)
        return encoding.decode(raw, self.register(name).size) if encoding else raw

    def encode(self, name: str, value: int) -> int:
        """Unsigned wire value of register `name`; raises ValueError when `value` does not fit."""
        size = self.register(name).size
        encoding = self.encodings.get(name)
        if encoding:
            return encoding.encode(value, size)
        if not 0 <= value < (1 << (8 * size)):
            raise ValueError(f"{value} does not fit register {name} of {self.name} ({size} bytes, unsigned)")
        return value


def table(entries: Mapping[str, tuple[int, int]]) -> dict[str, Register]:
    """Build a control table from `{name: (address, size)}`."""
    return {name: Register(address, size) for name, (address, size) in entries.items()}
