"""`lerobot-ros calibrate`: LeRobot's arm calibration, writing LeRobot's calibration JSON.

Interactive by default, like `lerobot-calibrate`. With `--yes --record-seconds N` it runs without a
terminal: it does not wait at the middle pose and records ranges for N seconds.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lerobot_ros.command import Command, CommandError

if TYPE_CHECKING:
    from lerobot_drivers.arms.spec import ArmSpec


def default_calibration_path(kind: str, robot_type: str, arm_id: str) -> Path:
    """Where LeRobot keeps the calibration of arm `arm_id` (HF_LEROBOT_CALIBRATION, HF_LEROBOT_HOME)."""
    root = os.environ.get("HF_LEROBOT_CALIBRATION")
    if root is None:
        home = os.environ.get("HF_LEROBOT_HOME", str(Path.home() / ".cache" / "huggingface" / "lerobot"))
        root = str(Path(home) / "calibration")
    return Path(root) / kind / robot_type / f"{arm_id}.json"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", required=True, help="LeRobot robot type: so100/so101/koch _follower or _leader")
    parser.add_argument("--port", default="", help="serial port of the arm, e.g. /dev/ttyACM0")
    parser.add_argument("--id", default="default", help="arm id; names the file as LeRobot does (default: default)")
    parser.add_argument("--output", default="", help="calibration file to write (default: LeRobot's location for --id)")
    parser.add_argument("--baudrate", type=int, default=0, help="bus baud rate (default: the arm's)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing calibration file")
    parser.add_argument(
        "--yes", action="store_true", help="do not wait for ENTER (the arm is already at its middle pose)"
    )
    parser.add_argument(
        "--record-seconds", type=float, default=0.0, help="record ranges for this long instead of until ENTER"
    )
    parser.add_argument(
        "--contract-units",
        metavar="CALIBRATION_FILE",
        default="",
        help="print the contract `units:` entries that reproduce LeRobot's numbers for this calibration, and exit",
    )


class TerminalPrompts:
    """Prompts on the terminal, or timed when non-interactive."""

    def __init__(self, assume_yes: bool, record_seconds: float, names: tuple[str, ...]) -> None:
        self.assume_yes = assume_yes
        self.record_seconds = record_seconds
        self.names = names
        self._record_end: float | None = None
        self._lines_shown = 0

    def wait(self, message: str) -> None:
        print(message, flush=True)
        if not self.assume_yes:
            input()

    def show_ranges(self, mins: dict[str, int], positions: dict[str, int], maxes: dict[str, int]) -> bool:
        if self._record_end is None:
            print(
                "Move every joint (except full-turn ones) through its whole range. "
                + (f"Recording for {self.record_seconds:g} s." if self.record_seconds else "Press ENTER to stop."),
                flush=True,
            )
            self._record_end = time.monotonic() + self.record_seconds
        if self.record_seconds:
            time.sleep(0.02)
            return time.monotonic() >= self._record_end
        if self._lines_shown:
            print(f"\x1b[{self._lines_shown}A", end="")
        lines = [f"{'NAME':<15} | {'MIN':>6} | {'POS':>6} | {'MAX':>6}"]
        lines += [f"{n:<15} | {mins[n]:>6} | {positions[n]:>6} | {maxes[n]:>6}" for n in mins]
        print("\n".join(lines), flush=True)
        self._lines_shown = len(lines)
        ready, _, _ = select.select([sys.stdin], [], [], 0.05)
        if ready:
            sys.stdin.readline()
            return True
        return False


def _run(args: argparse.Namespace) -> int:
    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import make_bus
    from lerobot_drivers.arms.calibrate import run_calibration
    from lerobot_drivers.motors.calibration import dumps_calibration, save_calibration
    from lerobot_drivers.motors.errors import MotorError

    try:
        spec = get_arm(args.robot)
    except ValueError as err:
        raise CommandError(str(err)) from None
    if args.contract_units:
        return _print_contract_units(spec, args.contract_units)
    if not args.port:
        raise CommandError("--port is required to calibrate (e.g. --port /dev/ttyACM0)")
    if args.record_seconds < 0:
        raise CommandError(f"--record-seconds must be >= 0, got {args.record_seconds}")
    interactive = not (args.yes and args.record_seconds)
    if interactive and not sys.stdin.isatty():
        raise CommandError("stdin is not a terminal: pass --yes and --record-seconds N to calibrate without prompts")
    output = (
        Path(args.output) if args.output else default_calibration_path(spec.calibration_kind, spec.robot_type, args.id)
    )
    if output.exists() and not args.overwrite:
        raise CommandError(f"{output} exists; pass --overwrite to replace it (or --output for another file)")
    bus = make_bus(spec, args.port, baudrate=args.baudrate or None)
    try:
        bus.open()
        bus.verify_motors()
        calibration = run_calibration(spec, bus, TerminalPrompts(args.yes, args.record_seconds, spec.joint_names))
    except MotorError as err:
        raise CommandError(str(err)) from None
    finally:
        bus.close()
    save_calibration(output, calibration)
    print(dumps_calibration(calibration))
    print(f"Calibration saved to {output}")
    return 0


def _print_contract_units(spec: ArmSpec, path: str) -> int:
    from lerobot_drivers.motors.calibration import (
        NormMode,
        check_calibration_location,
        contract_range,
        load_calibration,
        validate_calibration,
    )
    from lerobot_drivers.motors.errors import MotorError

    try:
        check_calibration_location(path, spec.robot_type, spec.calibration_kind)
        calibration = load_calibration(path)
        validate_calibration(calibration, spec.expected_calibration(), spec.robot_type, path)
    except MotorError as err:
        raise CommandError(str(err)) from None
    prefix = spec.robot_type.split("_")[0]
    print(f"# contract units for {spec.robot_type} from {path}: radians on the topic -> LeRobot values")
    print("units:")
    ranged = {}
    for joint in spec.joints:
        if joint.norm_mode is NormMode.DEGREES:
            continue
        (a, b), (c, d) = contract_range(
            calibration[joint.name], joint.norm_mode, spec.model(joint.name).resolution, spec.apply_drive_mode
        )
        name = f"{prefix}_{joint.name}_{joint.norm_mode.value}"
        ranged[joint.name] = name
        print(f"  {name}: {{kind: range, in: [{a:.6f}, {b:.6f}], out: [{c:g}, {d:g}]}}")
    joints = ", ".join(f"{j}: {n}" for j, n in ranged.items())
    print(f"  lerobot_{prefix}: {{kind: per_joint, default: rad_to_deg, joints: {{{joints}}}}}")
    return 0


COMMAND = Command(
    name="calibrate",
    help="calibrate an SO-100/SO-101/Koch arm and write LeRobot's calibration file",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
