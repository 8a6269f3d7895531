"""Packet encode/decode against packets written out by hand from the Feetech and ROBOTIS datasheet layouts."""

import pytest

from lerobot_drivers.motors.dynamixel import protocol as dxl
from lerobot_drivers.motors.encoding import (
    decode_sign_magnitude,
    decode_twos_complement,
    encode_sign_magnitude,
    encode_twos_complement,
)
from lerobot_drivers.motors.errors import CorruptReplyError
from lerobot_drivers.motors.feetech import protocol as ft


def test_feetech_ping_and_read_packets_match_the_datasheet_layout():
    # FF FF ID LEN INSTR CHK, CHK = ~(ID + LEN + INSTR) & 0xFF
    assert ft.ping(1) == bytes([0xFF, 0xFF, 0x01, 0x02, 0x01, 0xFB])
    # READ Present_Position (56 = 0x38), 2 bytes: ~(1 + 4 + 2 + 0x38 + 2) = ~0x41 = 0xBE
    assert ft.read(1, 56, 2) == bytes([0xFF, 0xFF, 0x01, 0x04, 0x02, 0x38, 0x02, 0xBE])


def test_feetech_write_goal_position_little_endian():
    # WRITE id 1, addr 42 (0x2A), value 2048 = 00 08 little-endian
    packet = ft.write(1, 42, (2048).to_bytes(2, "little"))
    body = [0x01, 0x05, 0x03, 0x2A, 0x00, 0x08]
    assert packet == bytes([0xFF, 0xFF, *body, ~sum(body) & 0xFF])


def test_feetech_sync_packets():
    read = ft.sync_read([1, 2, 3], 56, 2)
    body = [0xFE, 0x07, 0x82, 0x38, 0x02, 0x01, 0x02, 0x03]
    assert read == bytes([0xFF, 0xFF, *body, ~sum(body) & 0xFF])
    write = ft.sync_write(42, 2, {1: b"\x00\x08", 2: b"\xff\x0f"})
    body = [0xFE, 0x0A, 0x83, 0x2A, 0x02, 0x01, 0x00, 0x08, 0x02, 0xFF, 0x0F]
    assert write == bytes([0xFF, 0xFF, *body, ~sum(body) & 0xFF])


def test_feetech_status_decode_and_checksum_error():
    # status of id 1: error 0, Present_Position = 0x0800
    body = [0x01, 0x04, 0x00, 0x00, 0x08]
    status = bytes([0xFF, 0xFF, *body, ~sum(body) & 0xFF])
    packet = ft.decode(status)
    assert (packet.motor_id, packet.code, packet.params) == (1, 0, b"\x00\x08")
    with pytest.raises(CorruptReplyError, match="checksum"):
        ft.decode(status[:-1] + bytes([status[-1] ^ 1]))


def test_feetech_stream_decoder_resyncs_after_garbage():
    body = [0x02, 0x02, 0x20]  # id 2, overload error bit
    status = bytes([0xFF, 0xFF, *body, ~sum(body) & 0xFF])
    decoder = ft.StreamDecoder()
    out = decoder.feed(b"\x00\x13" + status[:3])
    assert out == []
    (packet,) = decoder.feed(status[3:])
    assert packet.motor_id == 2 and packet.code == 0x20


def test_dynamixel_packets_match_the_e_manual_examples():
    # Protocol 2.0 e-manual: ping id 1, read Present_Position (132) of id 1, and a ping status.
    assert dxl.ping(1) == bytes.fromhex("FF FF FD 00 01 03 00 01 19 4E")
    assert dxl.read(1, 132, 4) == bytes.fromhex("FF FF FD 00 01 07 00 02 84 00 04 00 1D 15")
    status = dxl.decode(bytes.fromhex("FF FF FD 00 01 07 00 55 00 06 04 26 65 5D"))
    assert (status.motor_id, status.error, status.params) == (1, 0, bytes([0x06, 0x04, 0x26]))
    # Sync write example: ids 1 and 2, Goal_Position (116), 4 bytes each.
    packet = dxl.sync_write(116, 4, {1: (150).to_bytes(4, "little"), 2: (170).to_bytes(4, "little")})
    assert packet == bytes.fromhex("FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87")


def test_dynamixel_byte_stuffing_round_trip_and_crc_error():
    data = bytes([0xFF, 0xFF, 0xFD, 0x01])
    packet = dxl.write(1, 116, data)
    assert b"\xff\xff\xfd\xfd" in packet[4:]  # stuffed after the header
    assert dxl.decode(packet).params == (116).to_bytes(2, "little") + data
    with pytest.raises(CorruptReplyError, match="CRC"):
        dxl.decode(packet[:-1] + bytes([packet[-1] ^ 0xFF]))


def test_sign_encodings():
    assert encode_sign_magnitude(-100, 15) == 0x8064
    assert decode_sign_magnitude(0x8064, 15) == -100
    assert encode_sign_magnitude(-1000, 11) == 0x800 | 1000
    assert decode_sign_magnitude(0x800 | 1000, 11) == -1000
    with pytest.raises(ValueError):
        encode_sign_magnitude(5000, 11)
    assert encode_twos_complement(-1, 4) == 0xFFFFFFFF
    assert decode_twos_complement(0xFFFFFC18, 4) == -1000
