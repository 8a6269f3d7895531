"""One bag -> a stream of episode events (frames with every feature's value, episode reports).

`bag_events` is pure with respect to the dataset: it reads, checks, aligns and decodes, and yields events;
`lerobot_bags.pipeline` feeds them to the dataset writer (in this process or from worker
processes), so serial and parallel conversion produce the same frames.

Rules for messages that cannot be used as they are (counted per topic in the bag's report, with a warning):

* a topic recorded with several types: each message is decoded with its own connection's type; messages of
  another type than the contract's are skipped, and the grid slots they would have filled count as dropped
  (``frames_dropped_unusable``), so the coverage says what was lost;
* a damaged message (CDR that does not parse, impossible values, an image that does not fit the contract:
  `FeatureContract.image_problem`, checked without decoding) is dropped on its own: frames hold the previous
  sound sample; an image that passes the checks but does not decode drops its frame (``frames_dropped_damaged``);
* equal stamps (`lerobot_contract.align.absorb_equal_stamp`): exact duplicates are dropped, of two different
  samples with one stamp the later one wins.

A bag is refused only when a feature is left with no usable message at all.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_bags.errors import BagError
from lerobot_bags.reader import BagSource
from lerobot_contract import Contract, FeatureContract, MessageMismatchError, NonFiniteValueError
from lerobot_contract.align import AlignedFrame, Aligner, AlignFeature, SyncReport
from lerobot_contract.errors import NonMonotonicStampError
from lerobot_contract.frames import FrameDecoder
from lerobot_contract.time import NS

SPLIT_KINDS = ("one-per-bag", "marker", "gap")
# Header and receive clocks further apart than this are reported as different clocks (sim vs wall time).
CLOCK_MISMATCH_S = 1.0
# A header stamp that moves this much further ahead than the receive clock since the topic's previous message is
# damaged (a flipped high bit), not a recording: refused instead of stretching the episode over years of frames.
MAX_STAMP_JUMP_S = 60.0


@dataclass(frozen=True)
class SplitRule:
    """How a bag is cut into episodes: `one-per-bag`, `marker` (each message on `topic` starts one), `gap`."""

    kind: str = "one-per-bag"
    topic: str | None = None
    gap_s: float = 0.0

    @classmethod
    def parse(cls, text: str) -> SplitRule:
        """``one-per-bag``, ``marker:/topic`` or ``gap:SECONDS``."""
        kind, _, arg = text.partition(":")
        if kind == "one-per-bag" and not arg:
            return cls()
        if kind == "marker" and arg.startswith("/"):
            return cls("marker", topic=arg)
        if kind == "gap":
            try:
                seconds = float(arg)
            except ValueError:
                seconds = -1.0
            if seconds > 0 and math.isfinite(seconds):
                return cls("gap", gap_s=seconds)
        raise ValueError(f"--split {text!r}: use one-per-bag, marker:/TOPIC or gap:SECONDS (a positive number)")


@dataclass(frozen=True)
class ConvertOptions:
    """Everything that decides how a bag becomes episodes (picklable, sent to worker processes)."""

    contract: Contract
    stamp: str = "header"
    align: str = "hold"
    tolerance_s: float | None = None
    task: str | None = None
    task_topic: str | None = None
    split: SplitRule = field(default_factory=SplitRule)
    allow_type_change: bool = False  # convert a topic's messages of the contract's type when it carries others too

    def __post_init__(self) -> None:
        if self.stamp not in ("header", "receive"):
            raise ValueError(f"stamp must be 'header' or 'receive', got {self.stamp!r}")
        if self.align not in ("hold", "nearest", "linear"):
            raise ValueError(f"align must be 'hold', 'nearest' or 'linear', got {self.align!r}")
        tol = self.tolerance_s
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1e6):
            # nan, inf and negative values used to fail deep inside the aligner with a traceback.
            raise ValueError(f"tolerance must be a positive, finite number of seconds, got {tol!r}")


@dataclass
class EpisodeStartEvent:
    """The next frames belong to a new episode of `task` (sent before its first frame); `part` numbers the
    bag's episode ranges."""

    task: str
    part: int = 0


@dataclass
class FrameEvent:
    """One dataset frame: a value for every contract feature."""

    values: dict[str, npt.NDArray[Any]]


@dataclass
class EpisodeEvent:
    """An episode of the bag is complete (it may hold zero frames: the consumer reports it as skipped)."""

    bag: str
    task: str
    frames: int
    report: dict[str, Any]
    part: int = 0
    converted_before: bool = False  # a part the caller asked to skip: no frames were sent


@dataclass
class BagEvent:
    """The bag is done (`error` set when it failed part-way; the open episode must then be discarded)."""

    bag: str
    info: dict[str, Any]
    error: str | None = None


Event = EpisodeStartEvent | FrameEvent | EpisodeEvent | BagEvent


@dataclass
class _Range:
    start_ns: int
    end_ns: int  # exclusive
    task: str
    aligner: Aligner | None = None


@dataclass
class _ClockStats:
    count: int = 0
    offset_sum_s: float = 0.0

    def add(self, header_ns: int, receive_ns: int) -> None:
        self.count += 1
        self.offset_sum_s += (receive_ns - header_ns) / NS

    @property
    def mean_s(self) -> float:
        return self.offset_sum_s / self.count if self.count else 0.0


def check_contract_against_bag(
    bag: BagSource, contract: Contract, stamp: str, *, allow_type_change: bool = False
) -> None:
    """Raise BagError when a contract topic is missing, has no message of the contract's type, carries messages of
    another type too (unless `allow_type_change`: those are then skipped, counted and warned), lacks a field or
    a header."""
    for feat in contract.features.values():
        info = bag.check_topic(feat.topic, feat.type)
        others = {t: n for t, n in info.types.items() if t != feat.type and n}
        if info.types[feat.type] == 0 and others:
            kinds = ", ".join(f"{n} {t}" for t, n in others.items())
            raise BagError(
                f"bag {bag.path}: {feat.topic} has no {feat.type} message (the contract's type), only {kinds}"
            )
        if others and not allow_type_change:
            kinds = ", ".join(f"{n} {t}" for t, n in others.items())
            raise BagError(
                f"bag {bag.path}: {feat.topic} changes type in the bag ({info.types[feat.type]} {feat.type}, the "
                f"contract's type, and {kinds}); pass --allow-type-change to convert the {feat.type} messages only "
                "(the others are skipped and reported)"
            )
        if stamp == "header" and feat.type not in info.header_types:
            raise BagError(f"bag {bag.path}: {feat.topic} ({feat.type}) has no header stamp; use --stamp receive")
        if not feat.is_image:
            for path in (*feat.field_paths, *((feat.joint_names_field,) if feat.joints else ())):
                _check_field_path(bag, feat, path)
        else:
            have = {name for name, _ in bag.fielddefs(feat.type)}
            lacking = [name for name in IMAGE_FIELDS.get(feat.type, ()) if name not in have]
            if lacking:
                raise BagError(
                    f"bag {bag.path}: its definition of {feat.type} ({feat.topic}) lacks field(s) "
                    f"{', '.join(lacking)}; the embedded message definition is damaged or not a standard one"
                )


# Fields the image decoders read (lerobot_ros.images).
IMAGE_FIELDS = {
    "sensor_msgs/msg/Image": ("height", "width", "encoding", "is_bigendian", "step", "data"),
    "sensor_msgs/msg/CompressedImage": ("format", "data"),
}


def _check_field_path(bag: BagSource, feat: FeatureContract, path: str) -> None:
    where = f"contract {feat.source}: features.{feat.key}"
    msgtype = feat.type
    node: Any = None
    for part in path.split("."):
        if part.isdigit():
            if node is None or node[0].name not in ("ARRAY", "SEQUENCE"):
                raise BagError(f"{where}: {path!r} indexes [{part}] into a field that is not an array")
            node = node[1][0]
            continue
        if node is not None:
            if not (node[0].name == "NAME" and node[1] in bag.typestore.fielddefs):
                raise BagError(f"{where}: {path!r} goes into a non-message field")
            msgtype = node[1]
        fields = dict(bag.fielddefs(msgtype))
        if part not in fields:
            raise BagError(
                f"{where}: {feat.type} has no field {path!r} ({msgtype} fields: {', '.join(fields)}); "
                "fix `field` in the contract"
            )
        node = fields[part]
    if path in feat.field_paths and not _is_numeric(node):
        raise BagError(
            f"{where}: field {path!r} of {feat.type} is not numeric ({_describe(node)}); vector features need "
            "numbers or arrays of numbers"
        )


NUMERIC = {"bool", "byte", "char", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
NUMERIC |= {"float32", "float64"}


def _is_numeric(node: Any) -> bool:
    """True for a rosbags field descriptor of a number or an array/sequence of numbers."""
    kind, detail = node[0].name, node[1]
    if kind == "BASE":
        return bool(detail[0] in NUMERIC)
    if kind in ("ARRAY", "SEQUENCE"):
        return _is_numeric(detail[0])
    return False


def _describe(node: Any) -> str:
    kind, detail = node[0].name, node[1]
    if kind == "BASE":
        return str(detail[0])
    if kind == "NAME":
        return str(detail)
    return f"{kind.lower()} of {_describe(detail[0])}"


def _topic_stamp(bag: BagSource, topic: str, msgtype: str, receive_ns: int, raw: bytes | memoryview, stamp: str) -> int:
    if stamp == "header" and msgtype in bag.info.topics[topic].header_types:
        return bag.header_stamp_ns(raw, topic, msgtype)
    return receive_ns


def _text_messages(bag: BagSource, topic: str, stamp: str) -> list[tuple[int, str]]:
    """(stamp, text) of a marker/task topic (the `data` string when the type has one, else '')."""
    info = bag.info.topics.get(topic)
    if info is None:
        raise BagError(f"bag {bag.path} has no topic {topic} (topics: {', '.join(sorted(bag.info.topics))})")
    if not info.readable:
        raise BagError(f"bag {bag.path}: topic {topic} cannot be decoded: {info.problem}")
    out = []
    for _, msgtype, receive_ns, raw in bag.typed_messages([topic]):
        msg, reason = bag.checked_message(raw, topic, msgtype)
        if reason is not None:
            bag.refuse(topic, reason)
            continue
        text = getattr(msg, "data", "")
        out.append((_topic_stamp(bag, topic, msgtype, receive_ns, raw, stamp), text if isinstance(text, str) else ""))
    out.sort(key=lambda item: item[0])
    return out


def _task_for(start_ns: int, end_ns: int, tasks: Sequence[tuple[int, str]], fallback: str | None) -> str | None:
    """The newest task message at or before the episode start, else the first inside it, else the fallback."""
    before = [text for stamp, text in tasks if stamp <= start_ns and text]
    if before:
        return before[-1]
    inside = [text for stamp, text in tasks if start_ns <= stamp < end_ns and text]
    return inside[0] if inside else fallback


def _plan(bag: BagSource, options: ConvertOptions) -> list[_Range]:
    """Episode time ranges of the bag, with their task."""
    contract = options.contract
    tasks = _text_messages(bag, options.task_topic, options.stamp) if options.task_topic else []
    lo, hi = -(2**62), 2**62
    split = options.split
    if split.kind == "one-per-bag":
        bounds = [(lo, hi, "")]
    elif split.kind == "marker":
        assert split.topic is not None
        markers = _text_messages(bag, split.topic, options.stamp)
        if not markers:
            raise BagError(f"bag {bag.path}: marker topic {split.topic} has no messages, so there is no episode")
        stamps = [m[0] for m in markers] + [hi]
        bounds = [(stamps[i], stamps[i + 1], markers[i][1]) for i in range(len(markers))]
    else:
        bounds = [(a, b, "") for a, b in _gap_ranges(bag, contract, options.stamp, split.gap_s)]
    ranges = []
    for start, end, marker_text in bounds:
        task = options.task or marker_text or None
        if options.task_topic:
            task = _task_for(start, end, tasks, task)
        if not task:
            where = f"--task-topic {options.task_topic} has no message for it; " if options.task_topic else ""
            raise BagError(f"bag {bag.path}: no task text for an episode: {where}pass --task TEXT")
        ranges.append(_Range(start, end, task))
    return ranges


def _gap_ranges(bag: BagSource, contract: Contract, stamp: str, gap_s: float) -> list[tuple[int, int]]:
    """Time ranges separated by gaps longer than `gap_s` in any feature topic (a stamps-only pass)."""
    gap_ns = round(gap_s * NS)
    last: dict[str, int] = {}
    dead: list[tuple[int, int]] = []
    first, final = 2**62, -(2**62)
    previous: dict[str, tuple[int, int]] = {}
    types = {(f.topic, f.type) for f in contract.features.values()}
    for topic, msgtype, receive_ns, raw in bag.typed_messages(contract.topics):
        if (topic, msgtype) not in types or _refusal(bag, topic, msgtype, receive_ns, raw, previous)[1] is not None:
            continue  # counted by the conversion pass
        t = _topic_stamp(bag, topic, msgtype, receive_ns, raw, stamp)
        prev = last.get(topic)
        if prev is not None and t - prev > gap_ns:
            dead.append((prev, t))
        last[topic] = t if prev is None else max(prev, t)
        first, final = min(first, t), max(final, t)
    if not last:
        return []
    dead.sort()
    ranges = []
    start = first
    for gap_start, gap_end in dead:
        if gap_start >= start:
            ranges.append((start, gap_start + 1))
        start = max(start, gap_end)
    ranges.append((start, final + 1))
    return ranges


def _frame_values(decoder: FrameDecoder, bag: BagSource, frame: AlignedFrame) -> dict[str, npt.NDArray[Any]] | None:
    """Every feature's value of `frame`, or None when one of its images does not decode after all (it passed the
    checks before alignment: a damaged JPEG/PNG body); the image is counted as refused, the frame is dropped."""
    values: dict[str, npt.NDArray[Any]] = {}
    for key, pick in frame.picks.items():
        try:
            values[key] = decoder.value(key, pick)
        except MessageMismatchError as err:
            feat = decoder.features[key]
            if not feat.is_image:
                raise BagError(f"bag {bag.path}: {feat.topic}: {err}") from None
            bag.refuse(feat.topic, f"image does not decode ({_without_numbers(str(err))[:100]})")
            return None
    return values


def _without_numbers(text: str) -> str:
    return re.sub(r"\d+", "N", text)


def bag_events(path: str | Path, options: ConvertOptions, skip_parts: Collection[int] = ()) -> Iterator[Event]:
    """Convert one bag: yields FrameEvents, an EpisodeEvent after each episode, and a final BagEvent.

    Episode ranges numbered in `skip_parts` (converted by an earlier run) are aligned but send no frames: their
    EpisodeEvent has `converted_before` set.

    Problems found before any frame (missing topic, wrong type, missing field, no task) and problems part-way
    (corrupt data, non-monotonic stamps, a message without a contract joint) end the stream with a BagEvent
    carrying the error; the consumer discards the open episode, so nothing half-written is kept.
    """
    info: dict[str, Any] = {"bag": str(path)}
    try:
        with BagSource(path) as bag:
            info.update(storage=bag.info.storage, compression=bag.info.compression, stamp=options.stamp)
            info["warnings"] = bag.info.warnings
            check_contract_against_bag(
                bag, options.contract, options.stamp, allow_type_change=options.allow_type_change
            )
            ranges = _plan(bag, options)
            # The conversion pass counts the damaged messages of the feature topics (again, if _plan read them).
            for topic in options.contract.topics:
                bag.refused.pop(topic, None)
            clocks: dict[str, _ClockStats] = {}
            yield from _stream(bag, options, ranges, clocks, info, frozenset(skip_parts))
            info["direct_storage_read"] = bag.info.direct_storage_read
            info["warnings"] = bag.info.warnings + bag.count_warnings(options.contract.topics)
            info["warnings"] += bag.refused_warnings()
            info["refused_messages"] = {topic: dict(reasons) for topic, reasons in bag.refused.items()}
    except (BagError, MessageMismatchError) as err:
        yield BagEvent(str(path), info, error=str(err))
        return
    yield BagEvent(str(path), info)


def _stream(
    bag: BagSource,
    options: ConvertOptions,
    ranges: list[_Range],
    clocks: dict[str, _ClockStats],
    info: dict[str, Any],
    skip: frozenset[int],
) -> Iterator[Event]:
    contract = options.contract
    by_topic: dict[str, list[FeatureContract]] = {}
    for feat in contract.features.values():
        by_topic.setdefault(feat.topic, []).append(feat)
    starts = [r.start_ns for r in ranges]
    tol = None if options.tolerance_s is None else round(options.tolerance_s * NS)
    align_features = [
        AlignFeature(
            f.key,
            max_age_ns=None if f.max_age_s is None else round(f.max_age_s * NS),
            interpolate=not f.is_image,
            image=f.is_image,  # cameras place the frame grid's phase; the report counts their reused images
        )
        for f in contract.features.values()
    ]
    decoder = FrameDecoder(contract, bag.deserialize)
    active = 0
    outside = 0
    seq: dict[str, int] = {}
    started = [False] * len(ranges)

    def aligner(i: int) -> Aligner:
        rng = ranges[i]
        if rng.aligner is None:
            rng.aligner = Aligner(align_features, contract.fps, options.align, tol, per_frame=True)
        return rng.aligner

    def emit(frames: Iterator[AlignedFrame], i: int) -> Iterator[Event]:
        if i != active:
            # A later episode lacks samples of a feature the current one still streams, so it cannot have a
            # frame yet; its samples wait in its aligner.
            if next(frames, None) is not None:
                raise AssertionError("a later episode released frames before the current one finished")
            return
        if i in skip:
            for _ in frames:
                pass
            return
        for frame in frames:
            values = _frame_values(decoder, bag, frame)
            if values is None:
                aligner(i).report.drop_kept_frame()
                continue
            if not started[i]:
                started[i] = True
                yield EpisodeStartEvent(ranges[i].task, i)
            yield FrameEvent(values)

    def close_active() -> Iterator[Event]:
        nonlocal active
        while active < len(ranges) and aligner(active).finished:
            done = _episode_done(bag, ranges[active], aligner(active).report, clocks, options, info)
            done.part, done.converted_before = active, active in skip
            yield done
            active += 1
            if active < len(ranges):
                yield from emit(aligner(active).poll(), active)

    if not ranges:
        return
    previous: dict[str, tuple[int, int]] = {}  # per topic: (header, receive) stamp of the last accepted message
    other_types: dict[str, Counter[str]] = {}  # per topic: messages skipped for another type than the contract's
    for topic, msgtype, receive_ns, raw in bag.typed_messages(list(by_topic)):
        feats = [f for f in by_topic[topic] if f.type == msgtype]
        if not feats:
            other_types.setdefault(topic, Counter())[msgtype] += 1
            t = _skipped_stamp(bag, topic, msgtype, receive_ns, raw, options.stamp, clocks)
            idx = -1 if t is None else bisect.bisect_right(starts, t) - 1
            if t is not None and idx >= active and t < ranges[idx].end_ns:
                for feat in by_topic[topic]:
                    aligner(idx).skipped(feat.key, t)
            continue
        msg, reason = _refusal(bag, topic, msgtype, receive_ns, raw, previous)
        if reason is not None:
            bag.refuse(topic, reason)
            continue
        t = _topic_stamp(bag, topic, msgtype, receive_ns, raw, options.stamp)
        if msgtype in bag.info.topics[topic].header_types:
            clocks.setdefault(topic, _ClockStats()).add(bag.header_stamp_ns(raw, topic, msgtype), receive_ns)
        seq[topic] = seq.get(topic, 0) + 1
        idx = bisect.bisect_right(starts, t) - 1
        if idx < 0 or t >= ranges[idx].end_ns or idx < active:
            outside += 1
            continue
        payloads = _payloads(bag, feats, raw, msg, topic, seq[topic])
        if isinstance(payloads, str):
            bag.refuse(topic, payloads)
            continue
        for feat in feats:
            # This feature is done with every episode before the one its sample falls into.
            for j in range(active, idx):
                yield from emit(aligner(j).end(feat.key), j)
            try:
                yield from emit(aligner(idx).push(feat.key, t, payloads[feat.key]), idx)
            except NonMonotonicStampError as err:
                raise BagError(
                    f"bag {bag.path}: {topic} message {seq[topic]}: stamps are not monotonic ({err}); "
                    "use --stamp receive if the header stamps are unreliable"
                ) from None
        yield from close_active()
    _check_usable(bag, contract, ranges)
    while active < len(ranges):
        yield from emit(aligner(active).finish(), active)
        yield from close_active()
    info["samples_outside_episodes"] = outside
    info["clock"] = _clock_report(clocks, options.stamp)
    info["skipped_other_type"] = {topic: dict(counts) for topic, counts in other_types.items()}
    expected = {f.topic: f.type for f in contract.features.values()}
    for topic, counts in other_types.items():
        for msgtype, count in counts.items():
            bag.info.warnings.append(
                f"{topic}: skipped {count} message(s) of type {msgtype}, the contract expects {expected[topic]} "
                "(the topic changed type in the bag)"
            )
    info["equal_stamps"] = _equal_stamps(ranges, by_topic)
    for topic, counts in info["equal_stamps"].items():
        if counts["duplicates"]:
            bag.info.warnings.append(
                f"{topic}: dropped {counts['duplicates']} exact duplicate message(s) (same stamp, same data)"
            )
        if counts["conflicting"]:
            bag.info.warnings.append(
                f"{topic}: {counts['conflicting']} conflicting samples with equal stamps (the later one is kept)"
            )


def _check_usable(bag: BagSource, contract: Contract, ranges: Sequence[_Range]) -> None:
    """BagError when a feature got no usable message in the whole bag while some were refused (damaged, or not
    fitting the contract); no frame can have been sent then. Called before the last episodes are finished."""
    for feat in contract.features.values():
        samples = sum(r.aligner.report.features[feat.key].samples for r in ranges if r.aligner is not None)
        refused = bag.refused.get(feat.topic)
        if samples == 0 and refused:
            reason, count = refused.most_common(1)[0]
            raise BagError(
                f"bag {bag.path}: no usable {feat.topic} message for {feat.key}: all {sum(refused.values())} were "
                f"refused ({count} x {reason}); fix the contract if every message is so"
            )


def _skipped_stamp(
    bag: BagSource,
    topic: str,
    msgtype: str,
    receive_ns: int,
    raw: bytes | memoryview,
    stamp: str,
    clocks: dict[str, _ClockStats],
) -> int | None:
    """Where a message of another type than the contract's sits on the episode's clock (None: unknown). Without
    a header in its type, header time is estimated from its receive time and the topic's receive-header offset."""
    header_types = bag.info.topics[topic].header_types
    if stamp == "receive":
        return receive_ns
    if msgtype in header_types:
        try:
            return bag.header_stamp_ns(raw, topic, msgtype)
        except BagError:
            return None  # too short to hold a header: damaged as well as of another type
    clock = clocks.get(topic)
    return None if clock is None or not clock.count else receive_ns - round(clock.mean_s * NS)


def _equal_stamps(ranges: Sequence[_Range], by_topic: dict[str, list[FeatureContract]]) -> dict[str, dict[str, int]]:
    """Per topic, samples of all episodes dropped as exact duplicates and conflicting ones with equal stamps."""
    out: dict[str, dict[str, int]] = {}
    for topic, feats in by_topic.items():
        key = feats[0].key  # each feature of a topic sees its messages alike
        reports = [r.aligner.report.features[key] for r in ranges if r.aligner is not None]
        duplicates = sum(f.duplicates for f in reports)
        conflicting = sum(f.equal_stamp_conflicts for f in reports)
        if duplicates or conflicting:
            out[topic] = {"duplicates": duplicates, "conflicting": conflicting}
    return out


def _refusal(
    bag: BagSource,
    topic: str,
    msgtype: str,
    receive_ns: int,
    raw: bytes | memoryview,
    previous: dict[str, tuple[int, int]],
) -> tuple[object | None, str | None]:
    """(message, None) for a sound message of a feature topic, (None, why it is left out) for a damaged one."""
    msg, reason = bag.checked_message(raw, topic, msgtype)
    if reason is not None or msgtype not in bag.info.topics[topic].header_types:
        return msg, reason
    header_ns = bag.header_stamp_ns(raw, topic, msgtype)
    last = previous.get(topic)
    if last is not None and (header_ns - last[0]) - (receive_ns - last[1]) > MAX_STAMP_JUMP_S * NS:
        return None, f"header stamp jumps more than {MAX_STAMP_JUMP_S:.0f} s ahead of the receive clock"
    previous[topic] = (header_ns, receive_ns)
    return msg, None


def _payloads(
    bag: BagSource, feats: list[FeatureContract], raw: bytes | memoryview, msg: object, topic: str, index: int
) -> dict[str, Any] | str:
    """Vectors are converted now (small); images keep their raw bytes until a frame needs them.

    Returns why the message is refused instead when a selected value is NaN or +-inf (a frame then holds the
    previous sound sample: no non-finite value reaches the dataset or its statistics)."""
    out: dict[str, Any] = {}
    for feat in feats:
        if feat.is_image:
            if msg is None:
                msg = bag.deserialize(raw, feat.type)
            if (problem := feat.image_problem(msg)) is not None:
                return problem
            out[feat.key] = bytes(raw) if isinstance(raw, memoryview) else raw
            continue
        if msg is None:
            msg = bag.deserialize(raw, feat.type)
        try:
            values = feat.joint_units().apply(feat.raw_vector(msg))
        except NonFiniteValueError:  # the contract's own refusal of NaN/inf samples (issue 18 #3)
            return f"non-finite value(s) in {feat.key}"
        except MessageMismatchError as err:
            raise BagError(f"bag {bag.path}: {topic} message {index}: {err}") from None
        # Finite in float64 is not enough: the dataset stores feat.dtype (float32 overflows past ~3.4e38).
        with np.errstate(over="ignore", invalid="ignore"):
            stored = values.astype(feat.dtype)
        if not np.isfinite(values).all() or not np.isfinite(stored).all():
            return f"non-finite value(s) in {feat.key}"
        out[feat.key] = values
    return out


def _clock_report(clocks: dict[str, _ClockStats], stamp: str) -> dict[str, Any]:
    offsets = {topic: round(c.mean_s, 6) for topic, c in clocks.items()}
    different = {t: o for t, o in offsets.items() if abs(o) > CLOCK_MISMATCH_S}
    note = "header and receive stamps agree"
    if different:
        note = (
            f"header stamps and receive (bag) stamps are on different clocks on {', '.join(sorted(different))} "
            "(e.g. sim time vs wall clock); frames are placed by "
            + ("header stamps" if stamp == "header" else "receive stamps")
        )
    return {"stamp": stamp, "receive_minus_header_s": offsets, "note": note}


def _episode_done(
    bag: BagSource,
    rng: _Range,
    report: SyncReport,
    clocks: dict[str, _ClockStats],
    options: ConvertOptions,
    info: dict[str, Any],
) -> EpisodeEvent:
    clock = _clock_report(clocks, options.stamp)
    body: dict[str, Any] = {"bag": str(bag.path), "task": rng.task, "clock": clock, **report.as_dict()}
    if report.frames_kept == 0:
        missing = [k for k, f in report.features.items() if f.samples == 0]
        refused = sorted(
            {
                f"{count} of {topic} refused: {reason}"
                for feat in options.contract.features.values()
                if feat.key in missing
                for topic in (feat.topic,)
                for reason, count in bag.refused.get(topic, Counter()).most_common(2)
            }
        )
        reason = (
            f"no samples of {', '.join(missing)} in this episode" + (f" ({'; '.join(refused)})" if refused else "")
            if missing
            else "no frame passed the max_age/tolerance checks"
            if report.t0_ns is not None
            else "the features never overlap in time"
        )
        offsets = list(clock["receive_minus_header_s"].values())
        if options.stamp == "header" and offsets and max(offsets) - min(offsets) > CLOCK_MISMATCH_S:
            reason += "; the topics' header stamps are on different clocks, try --stamp receive"
        body["skipped"] = f"empty episode: {reason}"
    return EpisodeEvent(str(bag.path), rng.task, report.frames_kept, body)
