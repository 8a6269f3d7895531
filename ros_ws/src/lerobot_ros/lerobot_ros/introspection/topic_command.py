"""`lerobot-ros topic`: list, echo, measure, publish and inspect topics, like `ros2 topic`.

  lerobot-ros topic list -t
  lerobot-ros topic echo /follower/joint_states --once
  lerobot-ros topic echo /follower/joint_states --field position --csv
  lerobot-ros topic hz /cameras/front/image_raw -n 5
  lerobot-ros topic pub /chatter std_msgs/msg/String '{data: hello}' -r 10
  lerobot-ros topic pub -1 /follower/joint_commands sensor_msgs/msg/JointState '{header: auto, position: [0, 1]}'
  lerobot-ros topic info /chatter -v

Message types are written `pkg/msg/Type` or `pkg/Type`. Without a TYPE, echo and hz wait
(--timeout) for the topic to appear and take its type from the graph. The CLI's own node is
named `_lerobot_ros_cli_<pid>`, hidden from `node list` like the `ros2` CLI's nodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from lerobot_ros.command import Command, CommandError

DEFAULT_TRUNCATE_LENGTH = 128
REPORT_PERIOD_S = 1.0
ACK_TIMEOUT_S = 3.0
UNKNOWN_NODE_NAME = "_NODE_NAME_UNKNOWN_"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from lerobot_ros.introspection.options import (
        add_qos_arguments,
        add_spin_time,
        add_timeout,
        non_negative_float,
        non_negative_int,
        positive_float,
        positive_int,
    )
    from lerobot_ros.introspection.rate import DEFAULT_WINDOW

    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("list", help="list the topics in the graph")
    p.add_argument("-t", "--show-types", action="store_true", help="show each topic's type")
    p.add_argument("-c", "--count-topics", action="store_true", help="print only the number of topics")
    p.add_argument("--include-hidden-topics", action="store_true", help="include topics with a `_`-prefixed token")
    add_spin_time(p)

    p = verbs.add_parser("echo", help="print the messages of a topic as YAML")
    p.add_argument("topic", metavar="TOPIC", help="topic name, e.g. /chatter")
    p.add_argument("message_type", nargs="?", metavar="TYPE", help="message type (default: the graph's)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--once", action="store_true", help="print one message and exit")
    stop.add_argument("-n", "--times", type=positive_int, metavar="N", help="print N messages and exit")
    p.add_argument("--field", metavar="PATH", help="print only this field, e.g. header.stamp or position.0")
    p.add_argument("--csv", action="store_true", help="print each message as one comma-separated line")
    p.add_argument("--no-arr", action="store_true", help="print array fields as their type and length")
    p.add_argument("--no-str", action="store_true", help="print string fields as their length")
    p.add_argument("-f", "--full-length", action="store_true", help="never truncate arrays and strings")
    p.add_argument(
        "-l",
        "--truncate-length",
        type=non_negative_int,
        default=DEFAULT_TRUNCATE_LENGTH,
        metavar="N",
        help=f"cut arrays and strings after N elements, marked '...' (default: {DEFAULT_TRUNCATE_LENGTH})",
    )
    p.add_argument("--flow-style", action="store_true", help="print nested values in YAML flow style")
    add_timeout(p, "the topic to appear when TYPE is not given")
    add_qos_arguments(p)

    p = verbs.add_parser("hz", help="print the receive rate of a topic")
    p.add_argument("topic", metavar="TOPIC", help="topic name, e.g. /chatter")
    p.add_argument(
        "-w",
        "--window",
        type=positive_int,
        default=DEFAULT_WINDOW,
        metavar="N",
        help=f"number of message intervals the statistics use (default: {DEFAULT_WINDOW})",
    )
    p.add_argument("-n", "--times", type=positive_int, metavar="N", help="exit after N reports")
    p.add_argument("--duration", type=positive_float, metavar="S", help="measure for S seconds, report and exit")
    add_timeout(p, "the topic to appear")
    add_qos_arguments(p)

    p = verbs.add_parser("pub", help="publish a message given as YAML")
    p.add_argument("topic", metavar="TOPIC", help="topic name, e.g. /chatter")
    p.add_argument("message_type", metavar="TYPE", help="message type, e.g. std_msgs/msg/String")
    p.add_argument(
        "values",
        nargs="?",
        default="{}",
        metavar="VALUES",
        help="field values as YAML, e.g. '{data: hello}'; a Time takes seconds or `now`, a Header `auto`",
    )
    p.add_argument("-r", "--rate", type=positive_float, default=1.0, metavar="HZ", help="rate in Hz (default: 1)")
    p.add_argument("-p", "--print", type=non_negative_int, default=1, metavar="N", help="print every N-th message")
    count = p.add_mutually_exclusive_group()
    count.add_argument("-1", "--once", action="store_true", help="publish one message and exit")
    count.add_argument("-t", "--times", type=positive_int, metavar="N", help="publish N messages and exit")
    p.add_argument(
        "-w",
        "--wait-matching-subscriptions",
        type=non_negative_int,
        metavar="N",
        help="wait for N matching subscriptions before publishing (default: 1 with --once/--times, else 0)",
    )
    p.add_argument(
        "--max-wait-time-secs",
        type=non_negative_float,
        metavar="S",
        help="give up waiting for subscriptions after S seconds (default: wait forever)",
    )
    p.add_argument(
        "--keep-alive",
        type=non_negative_float,
        default=0.1,
        metavar="S",
        help="stay up S seconds after the last message, then until reliable subscribers acknowledged it",
    )
    add_qos_arguments(p, publisher=True)

    p = verbs.add_parser("info", help="print a topic's type and publisher/subscription counts")
    p.add_argument("topic", metavar="TOPIC", help="topic name, e.g. /chatter")
    p.add_argument("-v", "--verbose", action="store_true", help="list every endpoint with its node and QoS")
    add_timeout(p, "the topic to appear")
    add_spin_time(p)

    p = verbs.add_parser("type", help="print a topic's type")
    p.add_argument("topic", metavar="TOPIC", help="topic name, e.g. /chatter")
    add_timeout(p, "the topic to appear")


def _run(args: argparse.Namespace) -> int:
    from rclpy.executors import ExternalShutdownException

    verbs = {"list": _list, "echo": _echo, "hz": _hz, "pub": _pub, "info": _info, "type": _type}
    try:
        return verbs[args.verb](args)
    except ExternalShutdownException:
        return 0


def _list(args: argparse.Namespace) -> int:
    from lerobot_ros.introspection.graph import CliNode

    with CliNode() as cli:
        cli.discover(args.spin_time)
        topics = cli.topic_types(include_hidden=args.include_hidden_topics)
    if args.count_topics:
        print(len(topics))
        return 0
    for name, types in topics.items():
        print(f"{name} [{', '.join(types)}]" if args.show_types else name)
    return 0


def _echo(args: argparse.Namespace) -> int:
    from lerobot_ros.introspection.graph import CliNode, subscription_qos, topic_message_class
    from lerobot_ros.message_conversion import MessageConversionError

    limit = 1 if args.once else args.times
    printed = 0

    def on_message(msg: Any) -> None:
        nonlocal printed
        if limit is not None and printed >= limit:
            return
        try:
            text = _format_message(msg, args)
        except MessageConversionError as err:
            raise CommandError(str(err)) from None
        sys.stdout.write(text)
        sys.stdout.flush()
        printed += 1

    with CliNode() as cli:
        topic = cli.expand_topic(args.topic)
        msg_type = topic_message_class(cli, topic, args.message_type, args.timeout)
        cli.node.create_subscription(msg_type, topic, on_message, subscription_qos(cli, topic, args))
        cli.spin_until(lambda: limit is not None and printed >= limit, timeout=None)
    return 0


def _format_message(msg: Any, args: argparse.Namespace) -> str:
    from lerobot_ros.message_conversion import get_field, message_to_dict, plain_to_csv, to_yaml

    truncate_length = None if args.full_length else args.truncate_length
    value: Any = message_to_dict(msg, truncate_length=truncate_length, no_arr=args.no_arr, no_str=args.no_str)
    if args.field:
        value = get_field(value, args.field)
    if args.csv:
        return plain_to_csv(value) + "\n"
    if isinstance(value, dict | list):
        return to_yaml(value, flow_style=args.flow_style) + "---\n"
    return f"{value}\n---\n"


def _hz(args: argparse.Namespace) -> int:
    from lerobot_ros.introspection.graph import CliNode, subscription_qos, topic_message_class
    from lerobot_ros.introspection.rate import RateMeter

    meter = RateMeter(args.window)
    with CliNode() as cli:
        topic = cli.expand_topic(args.topic)
        msg_type = topic_message_class(cli, topic, None, args.timeout)
        cli.node.create_subscription(
            msg_type, topic, lambda _raw: meter.add(time.monotonic_ns()), subscription_qos(cli, topic, args), raw=True
        )
        started = time.monotonic()
        reports = 0
        reported_messages = 0
        next_report = None
        while args.times is None or reports < args.times:
            now = time.monotonic()
            if args.duration is not None and now - started >= args.duration:
                break
            if next_report is None and meter.messages:
                next_report = now + REPORT_PERIOD_S
            if next_report is not None and now >= next_report:
                next_report += REPORT_PERIOD_S
                stats = meter.stats()
                if stats is not None and meter.messages > reported_messages:
                    print(stats.report(), flush=True)
                    reports += 1
                    reported_messages = meter.messages
            cli.spin_until(lambda: False, timeout=0.05)
        if args.duration is not None and meter.messages > reported_messages:
            stats = meter.stats()
            if stats is not None:
                print(stats.report(), flush=True)
                reported_messages = meter.messages
    if reported_messages == 0:
        raise CommandError(
            f"received {meter.messages} message(s) on {topic} in {args.duration:g} s, too few to measure a rate; "
            "check that it is being published (`lerobot-ros topic info -v`) or measure for longer"
        )
    return 0


def _pub(args: argparse.Namespace) -> int:
    from rclpy.duration import Duration
    from rclpy.event_handler import PublisherEventCallbacks
    from rclpy.qos import QoSReliabilityPolicy

    from lerobot_ros.introspection.graph import CliNode, message_class, publisher_qos
    from lerobot_ros.message_conversion import MessageConversionError, message_from_dict, parse_yaml_mapping

    msg_type = message_class(args.message_type)
    try:
        values = parse_yaml_mapping(args.values)
        message_from_dict(msg_type, values)
    except MessageConversionError as err:
        raise CommandError(f"{err}") from None
    times = 1 if args.once else args.times
    wait_for = args.wait_matching_subscriptions
    if wait_for is None:
        wait_for = 1 if times else 0
    qos = publisher_qos(args)

    def on_incompatible_qos(event: Any) -> None:
        print(
            f"warning: a subscription on {topic} has incompatible QoS ({event.last_policy_kind.name}); "
            "pass matching --qos-* options",
            file=sys.stderr,
        )

    with CliNode() as cli:
        topic = cli.expand_topic(args.topic)
        publisher = cli.node.create_publisher(
            msg_type, topic, qos, event_callbacks=PublisherEventCallbacks(incompatible_qos=on_incompatible_qos)
        )
        if wait_for > 0:
            print(f"Waiting for at least {wait_for} matching subscription(s)...", flush=True)
            matched = cli.spin_until(lambda: publisher.get_subscription_count() >= wait_for, args.max_wait_time_secs)
            if not matched:
                raise CommandError(
                    f"{publisher.get_subscription_count()} of {wait_for} matching subscription(s) on {topic} after "
                    f"{args.max_wait_time_secs:g} s; start the subscriber, check its QoS, or pass -w 0"
                )
        print("publisher: beginning loop", flush=True)
        period = 1.0 / args.rate
        count = 0
        next_publish = time.monotonic()
        while times is None or count < times:
            cli.spin_for(next_publish - time.monotonic())
            msg = message_from_dict(msg_type, values)  # rebuilt so that `now` / `auto` stamps are fresh
            publisher.publish(msg)
            count += 1
            if args.print and count % args.print == 0:
                print(f"publishing #{count}: {msg!r}\n", flush=True)
            next_publish = max(next_publish + period, time.monotonic() - period)
        cli.spin_for(args.keep_alive)
        if qos.reliability == QoSReliabilityPolicy.RELIABLE:
            publisher.wait_for_all_acked(Duration(seconds=ACK_TIMEOUT_S))
    return 0


def _info(args: argparse.Namespace) -> int:
    from lerobot_ros.introspection.graph import CliNode

    started = time.monotonic()
    with CliNode() as cli:
        topic = cli.expand_topic(args.topic)
        cli.wait_for_topic(topic, args.timeout)
        cli.spin_for(args.spin_time - (time.monotonic() - started))

        def endpoints() -> tuple[list[Any], list[Any]] | None:
            found = cli.node.get_publishers_info_by_topic(topic), cli.node.get_subscriptions_info_by_topic(topic)
            # An endpoint's node is known only once its participant's discovery info has arrived.
            return found if all(e.node_name != UNKNOWN_NODE_NAME for e in found[0] + found[1]) else None

        publishers, subscriptions = cli.poll(endpoints, args.timeout - (time.monotonic() - started)) or (
            cli.node.get_publishers_info_by_topic(topic),
            cli.node.get_subscriptions_info_by_topic(topic),
        )
        types = cli.topic_types().get(topic, [])
    separator = "\n" if args.verbose else ""
    print(f"Type: {', '.join(types)}{separator}")
    for title, endpoint_list in (("Publisher count", publishers), ("Subscription count", subscriptions)):
        print(f"{title}: {len(endpoint_list)}{separator}")
        if args.verbose:
            for endpoint in endpoint_list:
                print(f"{endpoint}\n")
    return 0


def _type(args: argparse.Namespace) -> int:
    from lerobot_ros.introspection.graph import CliNode

    with CliNode() as cli:
        types = cli.wait_for_topic(cli.expand_topic(args.topic), args.timeout)
    for name in types:
        print(name)
    return 0


COMMAND = Command(
    name="topic",
    help="list, echo, measure (hz), publish and inspect topics, like `ros2 topic`",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
