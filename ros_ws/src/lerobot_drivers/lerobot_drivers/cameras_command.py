"""`lerobot-ros cameras find`: list the cameras and their modes (LeRobot's `lerobot-find-cameras opencv`).

Use the printed device (a /dev/v4l/by-id path survives re-plugging) as `device` in the robot config
(config/robots/*.yaml) and a listed mode as width/height/fps/fourcc.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from lerobot_ros.command import Command, CommandError


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    find = sub.add_parser("find", help="list cameras and the modes they support")
    find.add_argument("devices", nargs="*", help="devices to inspect (default: every /dev/video*, or indices 0..9)")
    find.add_argument("--max-index", type=int, default=10, help="indices tried where there is no /dev/video*")
    find.add_argument("--no-probe", action="store_true", help="only the default mode (probing takes a few seconds)")
    find.add_argument("--json", action="store_true", help="print JSON")


def _run(args: argparse.Namespace) -> int:
    from lerobot_drivers.cameras.find import candidate_devices, find_cameras

    devices = list(args.devices) or candidate_devices(max_index=args.max_index)
    cameras = find_cameras(devices, probe=not args.no_probe)
    if args.json:
        print(json.dumps([asdict(c) for c in cameras], indent=2))
        return 0
    if not cameras:
        where = ", ".join(devices) if devices else "no /dev/video* device nodes"
        raise CommandError(
            f"no camera found ({where}); is it plugged in (lsusb), is the user in the `video` group, "
            "does another program hold it?"
        )
    for cam in cameras:
        print(f"{cam.device}" + (f"  ({cam.name})" if cam.name else ""))
        for path in cam.stable_paths:
            print(f"  stable path: {path}")
        if cam.error:
            print(f"  error: {cam.error}")
        if cam.default_mode is not None:
            print(f"  default: {cam.default_mode}")
        if cam.modes:
            print("  modes: " + ", ".join(str(m) for m in cam.modes))
    return 0


COMMAND = Command(
    name="cameras",
    help="find cameras and the modes they support (like lerobot-find-cameras)",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
