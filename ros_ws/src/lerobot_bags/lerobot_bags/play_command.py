"""`lerobot-ros bag play`: publish a rosbag2 bag (mcap or sqlite3, compressed or not) like `ros2 bag play`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lerobot_ros.command import CommandError, stop_on_signals


def add_play(verbs: Any) -> None:
    """Add the `play` verb to `lerobot-ros bag`."""
    play = verbs.add_parser(
        "play", help="publish a bag's messages on their topics, timed as recorded", description=__doc__
    )
    play.add_argument("bag", type=Path, metavar="BAG", help="bag folder (metadata.yaml + storage files)")
    play.add_argument("-r", "--rate", type=float, default=1.0, help="playback speed factor (default 1.0)")
    play.add_argument("-l", "--loop", action="store_true", help="play again from the start when the end is reached")
    play.add_argument("--topics", nargs="+", default=[], metavar="TOPIC", help="play only these topics")
    play.add_argument(
        "--clock",
        type=float,
        nargs="?",
        const=40.0,
        default=0.0,
        metavar="HZ",
        help="publish the bag's time on /clock at HZ (default 40 when given without a value), for use_sim_time",
    )
    play.add_argument("--start-offset", type=float, default=0.0, metavar="S", help="start S seconds into the bag")
    play.add_argument(
        "--wait-for-subscribers",
        action="store_true",
        help="start only when every played topic has a subscriber (nothing is lost to discovery)",
    )


def run_play(args: argparse.Namespace) -> int:
    """Run `bag play`."""
    import rclpy

    from lerobot_bags.errors import BagError
    from lerobot_bags.nodes.bag_player import BagPlayer
    from lerobot_bags.play import BagPlayback, PlayOptions
    from lerobot_ros.dds import apply_ros_environment
    from lerobot_ros.message_conversion import MessageTypeError, import_message_type

    try:
        options = PlayOptions(
            rate=args.rate,
            loop=args.loop,
            topics=tuple(args.topics),
            clock_hz=args.clock,
            start_offset_s=args.start_offset,
        )
    except ValueError as err:
        raise CommandError(str(err)) from None

    def installed(msgtype: str) -> bool:
        try:
            import_message_type(msgtype)
        except MessageTypeError:
            return False
        return True

    try:
        playback = BagPlayback.open(args.bag, options, installed)
    except BagError as err:
        raise CommandError(str(err)) from None
    if options.clock_hz > 0 and "/clock" in playback.topics:
        del playback.topics["/clock"]
        playback.skipped["/clock"] = "--clock publishes /clock from the bag's time instead"
    for warning in playback.warnings:
        print(f"warning: {warning}", flush=True)
    for topic, why in playback.skipped.items():
        print(f"not playing {topic}: {why}", flush=True)

    apply_ros_environment()
    rclpy.init()
    stop = stop_on_signals()
    try:
        player = BagPlayer(playback)
        if args.wait_for_subscribers:
            print("waiting for a subscriber on every played topic (Ctrl-C to stop)", flush=True)
            player.wait_for_subscribers(stop.is_set)
        print(f"playing {args.bag} at {options.rate}x ({len(playback.topics)} topics, Ctrl-C to stop)", flush=True)
        try:
            player.play(stop.is_set)
        except BagError as err:
            raise CommandError(str(err), exit_code=1) from None
        unacknowledged = player.finish()
        summary = {
            "published": dict(sorted(player.published.items())),
            "skipped": playback.skipped,
            "unacknowledged": unacknowledged,
            "stopped": stop.is_set(),
        }
        player.destroy_node()
    finally:
        if rclpy.ok():
            rclpy.shutdown()
    print(json.dumps(summary, indent=2))
    return 0
