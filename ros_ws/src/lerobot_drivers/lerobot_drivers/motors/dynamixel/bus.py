"""Dynamixel protocol 2.0 bus written directly on pyserial (`SerialMotorBus`), with the packets of `protocol.py`.

Request and reply are kept in step by `PacketLink` (the same as the Feetech bus): a reply is taken only from
the id asked and with the data length asked, so a late answer to an earlier request is dropped and counted,
never read as this request's answer. dynamixel-sdk's PacketHandler takes any status of the asked id (its
`readTxRx` does not check the length) and does not drop what is left in the port before a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lerobot_drivers.motors.dynamixel import protocol
from lerobot_drivers.motors.dynamixel.tables import MODELS, STATUS, describe_status
from lerobot_drivers.motors.link import Status
from lerobot_drivers.motors.serial_bus import PacketModule, SerialMotorBus
from lerobot_drivers.motors.tables import ModelInfo

PING_DATA = 3  # model number (2 bytes) and firmware version


class DynamixelBus(SerialMotorBus):
    """Dynamixel X-series servos on one serial port (U2D2 or compatible).

    `timeout_s` is the time allowed for a reply beyond its wire time; the OS and USB adapter latency go in it.
    """

    family: ClassVar[str] = "dynamixel"
    models: ClassVar[Mapping[str, ModelInfo]] = MODELS
    packets: ClassVar[PacketModule] = protocol
    status_overhead: ClassVar[int] = 11  # FF FF FD 00 ID LEN_L LEN_H 55 ERR ... CRC_L CRC_H

    @staticmethod
    def status_of(packet: Any) -> Status | None:
        if packet.instruction != STATUS:
            return None  # an echoed request, not a reply
        return Status(packet.motor_id, packet.error, packet.params)

    def describe_status(self, error: int) -> str:
        return describe_status(error)

    def _ping(self, motor_id: int) -> int:
        reply = self._transact(protocol.ping(motor_id), [motor_id], PING_DATA)[motor_id]
        return int.from_bytes(reply.data[:2], "little")
