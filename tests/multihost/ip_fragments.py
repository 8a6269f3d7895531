"""Whether this host still reassembles fragmented UDP datagrams after many that lost a fragment (run as root).

A DDS sample larger than one Ethernet frame (a camera's JPEG, 20-60 kB, sent by the multihost profile as one
UDP datagram of up to 65500 bytes) crosses the network as IP fragments; a lossy link loses a fragment of some of
them, and the receiving kernel keeps each incomplete datagram for `net.ipv4.ipfrag_time` seconds, up to
`net.ipv4.ipfrag_high_thresh` bytes in all: past that it drops every new fragment, so no fragmented datagram
arrives until the incomplete ones expire. This sends, over this network namespace's loopback, `--incomplete`
datagrams of `--size` bytes with their second fragment left out (what a lossy wire leaves), then `--complete`
whole ones, and prints JSON: how many whole ones a UDP socket received and the host's ipfrag settings.

    ip netns exec NS python ip_fragments.py --incomplete 200 --complete 5
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
from pathlib import Path

FRAGMENT_PAYLOAD = 1480  # a 1500-byte Ethernet frame less the IPv4 header; a multiple of 8
LOOPBACK = "127.0.0.1"


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def udp_datagram(source_port: int, port: int, payload: bytes) -> bytes:
    """The UDP header and payload, with the checksum over the IPv4 pseudo-header (loopback to loopback)."""
    length = 8 + len(payload)
    address = socket.inet_aton(LOOPBACK)
    pseudo = address + address + struct.pack("!BBH", 0, socket.IPPROTO_UDP, length)
    header = struct.pack("!HHHH", source_port, port, length, 0)
    checksum = _checksum(pseudo + header + payload) or 0xFFFF
    return struct.pack("!HHHH", source_port, port, length, checksum) + payload


def ip_fragments(datagram: bytes, ident: int) -> list[bytes]:
    """`datagram` (UDP header and payload) as IPv4 fragments (the kernel fills in the header checksum)."""
    address = socket.inet_aton(LOOPBACK)
    fragments = []
    for offset in range(0, len(datagram), FRAGMENT_PAYLOAD):
        part = datagram[offset : offset + FRAGMENT_PAYLOAD]
        more = offset + FRAGMENT_PAYLOAD < len(datagram)
        flags_offset = (0x2000 if more else 0) | (offset // 8)
        header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(part), ident, flags_offset, 64,
                             socket.IPPROTO_UDP, 0, address, address)  # fmt: skip
        fragments.append(header + part)
    return fragments


def ipfrag_settings() -> dict[str, int]:
    return {
        name: int(Path(f"/proc/sys/net/ipv4/{name}").read_text())
        for name in ("ipfrag_time", "ipfrag_high_thresh", "ipfrag_low_thresh")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incomplete", type=int, default=200, help="datagrams sent without their 2nd fragment")
    parser.add_argument("--complete", type=int, default=5, help="whole datagrams sent after them")
    parser.add_argument("--size", type=int, default=40000, help="UDP payload bytes (a 640x480 JPEG's size)")
    parser.add_argument("--timeout", type=float, default=5.0, help="how long to wait for the whole ones (s)")
    args = parser.parse_args()
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    receiver.bind((LOOPBACK, 0))
    port = receiver.getsockname()[1]
    sender = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for i in range(args.incomplete + args.complete):
        payload = struct.pack("!I", i) + bytes(args.size - 4)
        fragments = ip_fragments(udp_datagram(40000, port, payload), ident=1 + i)
        if i < args.incomplete:
            fragments = fragments[:1] + fragments[2:]
        for fragment in fragments:
            sender.sendto(fragment, (LOOPBACK, 0))
    receiver.settimeout(args.timeout)
    received: list[int] = []
    while len(received) < args.complete:
        try:
            data = receiver.recv(1 << 17)
        except TimeoutError:
            break
        received.append(struct.unpack("!I", data[:4])[0])
    print(json.dumps({"complete_received": len(received), "indices": received, **ipfrag_settings()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
