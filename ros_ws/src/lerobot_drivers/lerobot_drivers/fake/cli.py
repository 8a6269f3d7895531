"""`fake_servo_bus`: serve a simulated arm on a pseudo-terminal until interrupted.

Prints `fake <family> bus for <robot> on <port>` once ready. `--link` makes a stable symlink to the pty
(for launch files); `--calibration-out` writes the calibration the fake motors hold, for the driver.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fake_servo_bus", description=__doc__)
    parser.add_argument("--robot", default="so101_follower", help="arm to simulate (LeRobot robot type)")
    parser.add_argument("--baudrate", type=int, default=0, help="baud rate of the motors (default: the arm's)")
    parser.add_argument("--calibration", default="", help="LeRobot calibration JSON to load into the motors")
    parser.add_argument("--calibration-out", default="", help="write the motors' calibration here")
    parser.add_argument("--link", default="", help="create this symlink to the pty")
    parser.add_argument("--drop-rate", type=float, default=0.0, help="fraction of replies dropped")
    parser.add_argument("--corrupt-rate", type=float, default=0.0, help="fraction of replies with a bad checksum")
    parser.add_argument("--emulate-wire-time", action="store_true", help="delay replies by their wire time")
    parser.add_argument(
        "--linger",
        type=float,
        default=1.5,
        help="keep serving this long after SIGINT/SIGTERM so drivers can release torque",
    )
    parser.add_argument("--ros-args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.fake.arms import fake_arm_bus
    from lerobot_drivers.fake.bus import PtyServoBus
    from lerobot_drivers.motors.calibration import load_calibration, save_calibration
    from lerobot_drivers.motors.errors import MotorError

    try:
        spec = get_arm(args.robot)
        calibration = load_calibration(args.calibration) if args.calibration else default_fake_calibration(spec)
        bus = fake_arm_bus(spec, calibration, baudrate=args.baudrate or None)
        bus.faults.drop_rate = args.drop_rate
        bus.faults.corrupt_rate = args.corrupt_rate
    except (MotorError, ValueError) as err:
        print(f"fake_servo_bus: {err}", file=sys.stderr)
        return 2
    if args.calibration_out:
        save_calibration(args.calibration_out, calibration)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with PtyServoBus(bus, emulate_wire_time=args.emulate_wire_time) as pty:
        link = Path(args.link) if args.link else None
        if link is not None:
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp = link.with_name(link.name + f".{os.getpid()}")
            tmp.symlink_to(pty.port)
            tmp.replace(link)
        print(f"fake {spec.family} bus for {spec.robot_type} on {pty.port}", flush=True)
        try:
            stop.wait()
            time.sleep(max(0.0, args.linger))
        finally:
            if link is not None and link.is_symlink() and os.readlink(link) == pty.port:
                link.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
