"""Feetech STS/SMS bus (protocol 0) written directly on pyserial (`SerialMotorBus`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lerobot_drivers.motors.feetech import protocol
from lerobot_drivers.motors.feetech.tables import MODELS, describe_status
from lerobot_drivers.motors.link import Status
from lerobot_drivers.motors.serial_bus import PacketModule, SerialMotorBus
from lerobot_drivers.motors.tables import ModelInfo


class FeetechBus(SerialMotorBus):
    """Feetech servos (STS3215) on one serial port.

    `timeout_s` is the time allowed for a reply beyond its wire time; the OS and USB adapter latency go in it.
    """

    family: ClassVar[str] = "feetech"
    models: ClassVar[Mapping[str, ModelInfo]] = MODELS
    packets: ClassVar[PacketModule] = protocol
    status_overhead: ClassVar[int] = 6  # FF FF ID LEN ERR ... CHK

    @staticmethod
    def status_of(packet: Any) -> Status:
        return Status(packet.motor_id, packet.code, packet.params)

    def describe_status(self, error: int) -> str:
        return describe_status(error)

    def _ping(self, motor_id: int) -> int:
        self._transact(protocol.ping(motor_id), [motor_id], 0)
        reply = self._read(motor_id, self.models["sts3215"].register("Model_Number").address, 2)
        return int.from_bytes(reply.data, "little")
