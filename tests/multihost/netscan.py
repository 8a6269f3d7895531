"""What a network namespace exposes beyond loopback: its bound sockets, and a port scan from its LAN addresses.

Run inside the namespace (`ip netns exec NS python netscan.py --address 10.231.5.1 --address fd6c::1`): prints
one JSON object with
- `sockets`: every listening TCP socket and every unconnected (bound) UDP socket of /proc/net/{tcp,tcp6,udp,udp6},
  with the processes (pid, command) holding it;
- `exposed`: those bound beyond loopback (any address but 127.0.0.0/8 and ::1), except a UDP socket bound to a
  multicast group that is joined on `lo` only (it can only receive this machine's own multicast);
- `reachable`: the independent check: for every bound port, a TCP connect or a UDP datagram from each LAN
  address to that address and port. TCP is reachable when the connection is accepted; UDP when no ICMP "port
  unreachable" comes back (the kernel answers for a port nobody is bound to, and loopback-routed ICMP is not
  rate-limited).
Everything stays inside the namespace.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

TCP_LISTEN = "0A"
UDP_UNCONNECTED = "07"


@dataclass(frozen=True)
class BoundSocket:
    proto: str  # "tcp" or "udp"
    address: str
    port: int
    inode: int
    processes: tuple[str, ...] = field(default=())

    @property
    def label(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.proto} {host}:{self.port} ({', '.join(self.processes) or 'no process found'})"


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return str(address.ipv4_mapped or address)


def _socket_owners(proc: Path = Path("/proc")) -> dict[int, list[str]]:
    """Socket inode -> ['pid command', ...] for every process this namespace's sockets could belong to."""
    owners: dict[int, list[str]] = {}
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (pid_dir / "fd").iterdir()]
            command = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:["):
                owners.setdefault(int(link[8:-1]), []).append(f"{pid_dir.name} {command[:160]}")
    return owners


def bound_sockets(net: Path = Path("/proc/net")) -> list[BoundSocket]:
    """Listening TCP and unconnected UDP sockets of the namespace this process runs in."""
    owners = _socket_owners()
    found = []
    for proto, wanted in (("tcp", TCP_LISTEN), ("udp", UDP_UNCONNECTED)):
        for table in (net / proto, net / f"{proto}6"):
            if not table.exists():
                continue
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] != wanted:
                    continue
                hex_address, hex_port = fields[1].split(":")
                inode = int(fields[9])
                found.append(
                    BoundSocket(proto, _address(hex_address), int(hex_port, 16), inode, tuple(owners.get(inode, [])))
                )
    return found


def multicast_memberships(net: Path = Path("/proc/net")) -> dict[str, set[str]]:
    """Multicast group -> the interfaces it is joined on (/proc/net/igmp and igmp6)."""
    groups: dict[str, set[str]] = {}
    igmp = net / "igmp"
    if igmp.exists():
        device = ""
        for line in igmp.read_text().splitlines()[1:]:
            if not line.startswith(("\t", " ")):
                device = line.split()[1]
            else:
                group = str(ipaddress.IPv4Address(bytes.fromhex(line.split()[0])[::-1]))
                groups.setdefault(group, set()).add(device)
    igmp6 = net / "igmp6"
    if igmp6.exists():
        for line in igmp6.read_text().splitlines():
            fields = line.split()
            groups.setdefault(str(ipaddress.IPv6Address(bytes.fromhex(fields[2]))), set()).add(fields[1])
    return groups


def is_exposed(sock: BoundSocket, memberships: dict[str, set[str]]) -> bool:
    address = ipaddress.ip_address(sock.address)
    if address.is_loopback:
        return False
    if address.is_multicast:
        return memberships.get(sock.address, set()) - {"lo"} != set()
    return True


def reachable(source: str, proto: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether `port` of `source` answers a TCP connect / swallows a UDP datagram sent from `source`."""
    family = socket.AF_INET6 if ":" in source else socket.AF_INET
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    with socket.socket(family, kind) as probe:
        probe.settimeout(timeout_s)
        probe.bind((source, 0))
        try:
            probe.connect((source, port))
            if proto == "tcp":
                return True
            probe.send(b"\0")
            probe.recv(1)
            return True  # something answered
        except ConnectionRefusedError:
            return False
        except TimeoutError:
            return proto == "udp"  # no "port unreachable": a socket took the datagram


def scan(addresses: list[str]) -> dict[str, object]:
    sockets = bound_sockets()
    memberships = multicast_memberships()
    exposed = [s.label for s in sockets if is_exposed(s, memberships)]
    ports = sorted({(s.proto, s.port) for s in sockets})
    hits = [f"{proto} {address} port {port}" for address in addresses for proto, port in ports
            if reachable(address, proto, port)]  # fmt: skip
    return {
        "sockets": [asdict(s) | {"label": s.label} for s in sockets],
        "memberships": {k: sorted(v) for k, v in memberships.items()},
        "exposed": exposed,
        "reachable": hits,
        "probed": [f"{proto} {port}" for proto, port in ports],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", action="append", default=[], help="a LAN address of this namespace")
    args = parser.parse_args(argv)
    json.dump(scan(args.address), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
