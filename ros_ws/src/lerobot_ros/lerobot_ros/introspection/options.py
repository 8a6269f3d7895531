"""Command-line options shared by `lerobot-ros topic` and `lerobot-ros node` (argparse only, no rclpy,
so that `lerobot-ros --help` stays fast). Names and defaults follow the `ros2` CLI."""

from __future__ import annotations

import argparse

RELIABILITY_CHOICES = ("reliable", "best_effort", "best_available", "system_default")
DURABILITY_CHOICES = ("volatile", "transient_local", "best_available", "system_default")
DEFAULT_DEPTH = 10
DEFAULT_SPIN_TIME_S = 1.0
DEFAULT_TIMEOUT_S = 10.0


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a number >= 0."""
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def add_spin_time(parser: argparse.ArgumentParser) -> None:
    """`--spin-time S`: how long to let DDS discovery run before reading the graph."""
    parser.add_argument(
        "--spin-time",
        type=non_negative_float,
        default=DEFAULT_SPIN_TIME_S,
        metavar="S",
        help=(
            f"seconds to wait for DDS discovery at least (default: {DEFAULT_SPIN_TIME_S:g}); then until the graph "
            "settles: no change for 1.5 s (longer than the 1 s DDS announcement period), up to 3 s more while no "
            "other node or an endpoint's node is unknown, 10 s at most"
        ),
    )


def add_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    """`--timeout S`: how long to wait for `what` (a topic, a node) to appear in the graph."""
    parser.add_argument(
        "--timeout",
        type=non_negative_float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for {what} (default: {DEFAULT_TIMEOUT_S:g})",
    )


def add_qos_arguments(parser: argparse.ArgumentParser, *, publisher: bool = False) -> None:
    """`--qos-reliability`, `--qos-durability` and `--qos-depth`."""
    if publisher:
        reliability_default, durability_default = "reliable", "volatile"
    else:
        reliability_default = durability_default = "match the publishers in the graph"
    parser.add_argument(
        "--qos-reliability",
        choices=RELIABILITY_CHOICES,
        help=f"reliability policy (default: {reliability_default})",
    )
    parser.add_argument(
        "--qos-durability",
        choices=DURABILITY_CHOICES,
        help=f"durability policy (default: {durability_default})",
    )
    parser.add_argument(
        "--qos-depth",
        type=positive_int,
        default=DEFAULT_DEPTH,
        metavar="N",
        help=f"history depth, KEEP_LAST (default: {DEFAULT_DEPTH})",
    )
