"""A user-space Ethernet cable between two interfaces that delays and drops frames (the harness's netem).

This kernel has no `netem` qdisc, so the two hosts of the multi-host tests have no direct link: each has a veth
pair into a third "wire" namespace where this process copies every Ethernet frame from one interface to the
other through AF_PACKET sockets, `delay_ms` later, dropping each with probability `loss_percent` / 100 (seeded).
Everything crosses it unchanged (ARP, DDS multicast discovery, unicast, IP fragments, TCP), so DDS needs no
peer configuration. The hosts' veth ends must have checksum and segmentation offloads off (`offload_off`),
else frames leave with partial checksums or as 64 kB super-frames that cannot be re-sent.

Counters (frames, bytes, dropped per direction) are written as JSON to `--stats` every 0.5 s and at exit.

    python wire.py --a IF_A --b IF_B --delay-ms 5 --loss-percent 1 --stats stats.json
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import time
from pathlib import Path

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SIOCETHTOOL = 0x8946
# ethtool "set" commands (linux/ethtool.h): tx checksum, scatter-gather, TSO, GSO, GRO.
ETHTOOL_OFFLOADS = {"tx-checksum": 0x17, "tso": 0x1F, "gso": 0x24, "gro": 0x2C}
STATS_PERIOD_S = 0.5


def offload_off(interface: str) -> None:
    """Turn checksum/segmentation offloads off on `interface` (in this process's network namespace)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for command in ETHTOOL_OFFLOADS.values():
            value = ctypes.create_string_buffer(struct.pack("II", command, 0))
            request = struct.pack("16sP", interface.encode(), ctypes.addressof(value)).ljust(40, b"\0")
            fcntl.ioctl(sock, SIOCETHTOOL, request)


def open_port(interface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    sock.bind((interface, 0))
    sock.setblocking(False)
    return sock


class Wire:
    """Copies frames between two AF_PACKET sockets with a fixed one-way delay and random loss."""

    def __init__(self, a: str, b: str, delay_s: float, loss: float, seed: int) -> None:
        if not 0.0 <= loss < 1.0:
            raise ValueError(f"loss must be in [0, 1), got {loss}")
        if delay_s < 0:
            raise ValueError(f"delay must be >= 0, got {delay_s}")
        self.ports = {"a": open_port(a), "b": open_port(b)}
        self.delay_s = delay_s
        self.loss = loss
        self.random = random.Random(seed)
        self.stats = {d: {"frames": 0, "bytes": 0, "dropped": 0, "send_failed": 0} for d in ("a_to_b", "b_to_a")}
        self._queue: list[tuple[float, int, str, bytes]] = []
        self._sequence = 0

    def _receive(self, side: str, now: float) -> None:
        sock = self.ports[side]
        direction, other = ("a_to_b", "b") if side == "a" else ("b_to_a", "a")
        counts = self.stats[direction]
        while True:
            try:
                frame, address = sock.recvfrom(65536)
            except BlockingIOError:
                return
            if address[2] == PACKET_OUTGOING:
                continue  # our own copy of a frame this socket sent
            if self.loss and self.random.random() < self.loss:
                counts["dropped"] += 1
                continue
            self._sequence += 1
            heapq.heappush(self._queue, (now + self.delay_s, self._sequence, other, frame))

    def _release(self, now: float) -> None:
        while self._queue and self._queue[0][0] <= now:
            _, _, side, frame = heapq.heappop(self._queue)
            counts = self.stats["a_to_b" if side == "b" else "b_to_a"]
            try:
                self.ports[side].send(frame)
            except OSError:
                counts["send_failed"] += 1
                continue
            counts["frames"] += 1
            counts["bytes"] += len(frame)

    def run(self, stop: list[bool], stats_path: Path | None) -> None:
        next_stats = 0.0
        sockets = list(self.ports.values())
        sides = {sock.fileno(): side for side, sock in self.ports.items()}
        while not stop[0]:
            now = time.monotonic()
            timeout = STATS_PERIOD_S if not self._queue else max(0.0, self._queue[0][0] - now)
            readable, _, _ = select.select(sockets, [], [], min(timeout, STATS_PERIOD_S))
            now = time.monotonic()
            for sock in readable:
                self._receive(sides[sock.fileno()], now)
            self._release(time.monotonic())
            if stats_path is not None and now >= next_stats:
                write_stats(stats_path, self.stats)
                next_stats = now + STATS_PERIOD_S
        if stats_path is not None:
            write_stats(stats_path, self.stats)


def write_stats(path: Path, stats: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"time": time.monotonic(), **stats}))
    os.replace(tmp, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", help="interface towards host A")
    parser.add_argument("--b", help="interface towards host B")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay (ms)")
    parser.add_argument("--loss-percent", type=float, default=0.0, help="frames dropped (%%), each direction")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stats", type=Path, default=None, help="JSON counters file")
    parser.add_argument("--offload-off", nargs="*", default=[], help="only turn offloads off on these interfaces")
    args = parser.parse_args()
    if args.offload_off:
        for interface in args.offload_off:
            offload_off(interface)
        return 0
    if not args.a or not args.b:
        parser.error("--a and --b name the two interfaces to join")
    for interface in (args.a, args.b):
        offload_off(interface)
    wire = Wire(args.a, args.b, args.delay_ms / 1000.0, args.loss_percent / 100.0, args.seed)
    stop = [False]

    def on_signal(signum: int, frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"wire up: {args.a} <-> {args.b}, delay {args.delay_ms:g} ms, loss {args.loss_percent:g} %", flush=True)
    wire.run(stop, args.stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
