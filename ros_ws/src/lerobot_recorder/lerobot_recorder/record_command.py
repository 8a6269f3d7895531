"""`lerobot-ros bag record` / `bag play`: record topics into an mcap bag, play bags (no `ros2 bag` on PyPI)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lerobot_bags.play_command import add_play, run_play
from lerobot_ros.command import Command, CommandError, stop_on_signals


def _add_bag(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    record = verbs.add_parser("record", help="record topics into an mcap bag", description=__doc__)
    record.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to record")
    record.add_argument("-a", "--all", action="store_true", help="record every topic (but /rosout, /parameter_events)")
    record.add_argument("-e", "--regex", default=None, help="record topics matching this regular expression")
    record.add_argument("-x", "--exclude", default=None, help="skip topics matching this regular expression")
    record.add_argument("-o", "--output", type=Path, required=True, help="bag folder to create")
    record.add_argument("--max-bag-size", type=float, default=0.0, metavar="MB", help="split after this many MB")
    record.add_argument("--max-bag-duration", type=float, default=0.0, metavar="S", help="split after this long")
    record.add_argument(
        "--duration", type=float, default=0.0, metavar="S",
        help="stop S s after the first message was received: the bag spans S s (0: until Ctrl-C)",
    )  # fmt: skip
    record.add_argument("--use-sim-time", action="store_true", help="stamp messages with /clock time")
    add_play(verbs)


def _run_bag(args: argparse.Namespace) -> int:
    if args.verb == "play":
        return run_play(args)
    return _run_record(args)


def _run_record(args: argparse.Namespace) -> int:
    import rclpy
    from rclpy.parameter import Parameter

    from lerobot_recorder.nodes.bag_recorder import BagRecorder
    from lerobot_recorder.recorder import RecorderError, TopicSelectionError
    from lerobot_recorder.recorder.bag_writer import TopicSelection
    from lerobot_ros.dds import apply_ros_environment

    if args.max_bag_size < 0 or args.max_bag_duration < 0 or args.duration < 0:
        raise CommandError("--max-bag-size, --max-bag-duration and --duration must be >= 0")
    try:
        selection = TopicSelection(tuple(args.topics), args.regex, args.all, args.exclude)
    except TopicSelectionError as err:
        raise CommandError(str(err)) from None
    apply_ros_environment()
    rclpy.init()
    stop = stop_on_signals()
    # The duration counts from the first message received (bag stamps are reception times on the system clock), not
    # from the start: discovering the publishers takes a variable time, seconds on a loaded host.
    duration_ns = round(args.duration * 1e9)
    end_ns: int | None = None
    try:
        try:
            node = BagRecorder(
                selection,
                args.output,
                max_bytes=round(args.max_bag_size * 1e6),
                max_duration_ns=round(args.max_bag_duration * 1e9),
                parameter_overrides=[Parameter("use_sim_time", value=args.use_sim_time)],
            )
        except RecorderError as err:
            raise CommandError(str(err)) from None
        print(f"recording into {args.output} (Ctrl-C to stop)", flush=True)
        while not stop.is_set() and rclpy.ok() and node.error is None:
            rclpy.spin_once(node, timeout_sec=0.1)
            if duration_ns and end_ns is None and node.first_received_ns is not None:
                end_ns = node.first_received_ns + duration_ns
                node.stop_at(end_ns)
            if end_ns is not None and time.time_ns() >= end_ns:
                break
        node.stop_at(time.time_ns() if end_ns is None else min(end_ns, time.time_ns()))
        _drain(node)
        summary = node.finish()
        node.destroy_node()
    finally:
        if rclpy.ok():
            rclpy.shutdown()
    print(json.dumps(summary, indent=2))
    if summary["error"]:
        raise CommandError(summary["error"], exit_code=1)
    return 0


def _drain(node: object, quiet_s: float = 0.5, limit_s: float = 5.0) -> None:
    """Take what reached us before the stop and the middleware still holds: spin until nothing more was recorded
    for `quiet_s` (at most `limit_s`); what arrives after the stop is not recorded, so a live topic ends it too."""
    import rclpy

    deadline = time.monotonic() + limit_s
    last_count, last_change = -1, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - last_change < quiet_s:
        rclpy.spin_once(node, timeout_sec=0.05)  # type: ignore[arg-type]
        count = node.received  # type: ignore[attr-defined]
        if count != last_count:
            last_count, last_change = count, time.monotonic()


BAG = Command(
    name="bag",
    help="record topics into an mcap bag, play a bag (bag record / bag play)",
    add_arguments=_add_bag,
    run=_run_bag,
    description="Record ROS 2 topics into rosbag2 mcap bags (raw subscriptions, size/duration splits); play bags back.",
)
