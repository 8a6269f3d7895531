"""What `lerobot-ros bag play` publishes and when: the pure core of the bag player (no rclpy).

Like `ros2 bag play`: each topic is offered with the QoS its publishers offered while recording
(metadata `offered_qos_profiles`, adapted as rosbag2's player does: RELIABLE only when every recorded
publisher was, TRANSIENT_LOCAL only when every one was), messages go out as the raw CDR bytes stored in the
bag, and message k is due at `(receive_stamp_k - first_stamp) / rate` after playback starts. `/clock` (when
asked) carries the bag's receive time of the moment, so `use_sim_time` consumers see the recorded clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rosbags.interfaces import QosDurability, QosHistory, QosReliability

from lerobot_bags.errors import BagError
from lerobot_bags.reader import BagSource
from lerobot_contract.time import NS

DEFAULT_DEPTH = 10  # rosbag2's player default (rclcpp's default QoS) where the bag has no usable depth


@dataclass(frozen=True)
class PlayOptions:
    """`bag play` options; validated on construction (ValueError naming the option)."""

    rate: float = 1.0
    loop: bool = False
    topics: tuple[str, ...] = ()  # empty: every playable topic
    clock_hz: float = 0.0  # 0: no /clock
    start_offset_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ValueError(f"--rate must be > 0 (got {self.rate})")
        if not self.clock_hz >= 0:
            raise ValueError(f"--clock must be >= 0 Hz (got {self.clock_hz})")
        if not self.start_offset_s >= 0:
            raise ValueError(f"--start-offset must be >= 0 s (got {self.start_offset_s})")


@dataclass(frozen=True)
class PlayQos:
    """The QoS a topic is played with (plain values; the node turns it into an rclpy QoSProfile)."""

    reliable: bool = True
    transient_local: bool = False
    keep_all: bool = False
    depth: int = DEFAULT_DEPTH


def recorded_qos(profiles: Sequence[Any]) -> PlayQos:
    """rosbag2's adaptation of the offered profiles of one topic (rosbags `Qos` tuples) to one publisher QoS.

    RELIABLE when every recorded publisher offered RELIABLE (a reliable publisher also serves best-effort
    subscribers); TRANSIENT_LOCAL when every one did (latched topics stay latched); the largest KEEP_LAST
    depth offered (at least the default 10), KEEP_ALL when every one kept all. No profiles: rosbag2's
    defaults (RELIABLE, VOLATILE, KEEP_LAST 10).
    """
    if not profiles:
        return PlayQos()
    reliable = all(p.reliability == QosReliability.RELIABLE for p in profiles)
    latched = all(p.durability == QosDurability.TRANSIENT_LOCAL for p in profiles)
    keep_all = all(p.history == QosHistory.KEEP_ALL for p in profiles)
    depth = max([DEFAULT_DEPTH, *(int(p.depth) for p in profiles if p.history == QosHistory.KEEP_LAST)])
    return PlayQos(reliable=reliable, transient_local=latched, keep_all=keep_all, depth=depth)


@dataclass
class PlayTopic:
    """One topic the player publishes."""

    name: str
    msgtype: str
    qos: PlayQos
    count: int  # messages in the bag (metadata)


@dataclass(frozen=True)
class Due:
    """One message to publish `at_s` seconds (wall time) after the pass started."""

    at_s: float
    topic: str
    stamp_ns: int  # the bag's receive stamp
    raw: bytes


@dataclass
class BagPlayback:
    """The topics and the timed message sequence of a bag for `options` (see the module docstring)."""

    path: Path
    options: PlayOptions
    topics: dict[str, PlayTopic] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # topic -> why it is not played
    warnings: list[str] = field(default_factory=list)
    first_stamp_ns: int | None = None

    @classmethod
    def open(
        cls, path: str | Path, options: PlayOptions, publishable: Callable[[str], bool] | None = None
    ) -> BagPlayback:
        """Read the bag's topic table. `publishable(msgtype)`: whether this process can publish the type."""
        play = cls(Path(path), options)
        with BagSource(play.path) as source:
            play.warnings.extend(source.info.warnings)
            qos = source.offered_qos()
            known = source.info.topics
            missing = [t for t in options.topics if t not in known]
            if missing:
                have = ", ".join(sorted(known)) or "none"
                raise BagError(f"bag {play.path} has no topic {', '.join(missing)} (topics: {have})")
            for name, info in sorted(known.items()):
                if options.topics and name not in options.topics:
                    continue
                if name.endswith("/_service_event"):
                    play.skipped[name] = "service-event topic (service introspection)"
                elif publishable is not None and not publishable(info.msgtype):
                    play.skipped[name] = f"message type {info.msgtype} is not installed here"
                else:
                    play.topics[name] = PlayTopic(
                        name, info.msgtype, recorded_qos(qos.get(name, [])), info.metadata_count
                    )
            for name in options.topics:
                if name in play.skipped:
                    raise BagError(f"bag {play.path}: cannot play {name}: {play.skipped[name]}")
            for _, stamp, _ in source.messages(set(play.topics)):
                play.first_stamp_ns = stamp  # the storage yields in time order: the first is the earliest
                break
        if not play.topics:
            raise BagError(
                f"bag {play.path}: nothing to play ({'; '.join(f'{k}: {v}' for k, v in play.skipped.items())})"
            )
        return play

    def passes(self) -> Iterator[Iterator[Due]]:
        """One timed message sequence per pass over the bag (forever with --loop)."""
        while True:
            yield self._one_pass()
            if not self.options.loop:
                return

    def _one_pass(self) -> Iterator[Due]:
        offset_ns = round(self.options.start_offset_s * NS)
        with BagSource(self.path) as source:
            for topic, stamp, raw in source.messages(set(self.topics)):
                if self.first_stamp_ns is None:
                    self.first_stamp_ns = stamp
                start = self.first_stamp_ns + offset_ns
                if stamp < start:
                    continue
                yield Due((stamp - start) / NS / self.options.rate, topic, stamp, bytes(raw))

    def clock_ns(self, elapsed_s: float) -> int:
        """The bag time (receive clock) `elapsed_s` of wall time after a pass started."""
        first = self.first_stamp_ns or 0
        return first + round(self.options.start_offset_s * NS) + round(elapsed_s * self.options.rate * NS)
