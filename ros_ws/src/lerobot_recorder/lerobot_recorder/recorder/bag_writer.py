"""`lerobot-ros bag record`'s storage side (no rclpy): topic selection and an mcap bag writer that splits.

Messages arrive as raw CDR bytes (from raw subscriptions) and are written unchanged with their receive time.
Without a split limit the output folder is one rosbag2 bag. With `max_bytes` or `max_duration_ns` it holds
numbered bags ``<name>_0, <name>_1, ...`` (each complete and readable on its own, e.g. by `bag2dataset`):
a new one starts when the current one reaches the size or the duration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosbags.rosbag2 import StoragePlugin, WriterError
from rosbags.typesys.store import Typestore

from lerobot_bags.writer import Rosbag2Writer
from lerobot_recorder.recorder.errors import RecorderError, TopicSelectionError

# Topics `--all` leaves out unless named: the graph's own chatter.
DEFAULT_EXCLUDE = ("/rosout", "/parameter_events")


@dataclass(frozen=True)
class TopicSelection:
    """Which topics to record: named ones, those matching `regex`, or all (minus `exclude`)."""

    topics: tuple[str, ...] = ()
    regex: str | None = None
    all_topics: bool = False
    exclude: str | None = None

    def __post_init__(self) -> None:
        if not (self.topics or self.regex or self.all_topics):
            raise TopicSelectionError("no topics chosen: name topics, or pass --regex PATTERN or --all")
        for name, pattern in (("--regex", self.regex), ("--exclude", self.exclude)):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as err:
                    raise TopicSelectionError(f"{name} {pattern!r} is not a valid regular expression: {err}") from None
        bad = [t for t in self.topics if not t.startswith("/")]
        if bad:
            raise TopicSelectionError(f"topic names must be absolute (start with '/'): {', '.join(bad)}")

    def matches(self, topic: str) -> bool:
        """True when `topic` is to be recorded."""
        if topic in self.topics:
            return True
        if self.exclude is not None and re.search(self.exclude, topic):
            return False
        if self.regex is not None and re.search(self.regex, topic):
            return True
        return self.all_topics and topic not in DEFAULT_EXCLUDE


@dataclass
class BagStats:
    """Messages written per topic, bytes, the bags written."""

    messages: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    bags: list[Path] = field(default_factory=list)


class SplittingBagWriter:
    """Writes raw messages into an mcap bag (or a series of them, see the module docstring)."""

    def __init__(self, output: Path, typestore: Typestore, *, max_bytes: int = 0, max_duration_ns: int = 0) -> None:
        self.output = Path(output)
        if self.output.exists():
            raise RecorderError(f"{self.output} exists; choose a new output folder for the bag")
        self.typestore = typestore
        self.max_bytes = max_bytes
        self.max_duration_ns = max_duration_ns
        self.split = max_bytes > 0 or max_duration_ns > 0
        self.stats = BagStats()
        self._types: dict[str, str] = {}
        self._qos: dict[str, tuple[Any, ...]] = {}
        self._writer: Rosbag2Writer | None = None
        self._connections: dict[str, object] = {}
        self._bag_bytes = 0
        self._bag_start: int | None = None
        if self.split:
            self.output.mkdir(parents=True)

    def add_topic(self, topic: str, msgtype: str, offered_qos: Sequence[Any] = ()) -> None:
        """Declare a topic (before or while writing); `offered_qos`: its publishers' QoS (rosbags `Qos`)."""
        if msgtype not in self.typestore.fielddefs:
            raise RecorderError(f"{topic}: no definition of {msgtype} in the typestore; cannot record it")
        self._types[topic] = msgtype
        self._qos[topic] = tuple(offered_qos)
        if self._writer is not None:
            self._connect(topic)

    def _open(self) -> None:
        path = self.output / f"{self.output.name}_{len(self.stats.bags)}" if self.split else self.output
        try:
            writer = Rosbag2Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
            writer.open()
        except WriterError as err:
            raise RecorderError(f"cannot write the bag {path}: {err}") from None
        self._writer = writer
        self._connections = {}
        self._bag_bytes = 0
        self._bag_start = None
        self.stats.bags.append(path)
        for topic in self._types:
            self._connect(topic)

    def _connect(self, topic: str) -> None:
        assert self._writer is not None
        self._connections[topic] = self._writer.add_connection(
            topic, self._types[topic], typestore=self.typestore, offered_qos_profiles=self._qos.get(topic, ())
        )

    def write(self, topic: str, stamp_ns: int, raw: bytes) -> None:
        """Write one message (raw CDR) received at `stamp_ns`."""
        if self._writer is not None and self._full(stamp_ns):
            self._close_current()
        if self._writer is None:
            self._open()
        assert self._writer is not None
        if self._bag_start is None:
            self._bag_start = stamp_ns
        self._writer.write(self._connections[topic], stamp_ns, raw)  # type: ignore[arg-type]
        self._bag_bytes += len(raw)
        self.stats.bytes += len(raw)
        self.stats.messages[topic] = self.stats.messages.get(topic, 0) + 1

    def _full(self, stamp_ns: int) -> bool:
        if self.max_bytes and self._bag_bytes >= self.max_bytes:
            return True
        return bool(
            self.max_duration_ns and self._bag_start is not None and stamp_ns - self._bag_start >= self.max_duration_ns
        )

    def _close_current(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def close(self) -> BagStats:
        """Finish the bag(s); an output with no message at all still gets an (empty) bag."""
        if self._writer is None and not self.stats.bags:
            self._open()
        self._close_current()
        return self.stats


def topics_to_record(selection: TopicSelection, graph: Iterable[tuple[str, Sequence[str]]]) -> dict[str, str]:
    """{topic: type} of the graph's topics that `selection` takes (topics with several types are skipped)."""
    out: dict[str, str] = {}
    for topic, types in graph:
        if selection.matches(topic) and len(types) == 1:
            out[topic] = types[0]
    return out
