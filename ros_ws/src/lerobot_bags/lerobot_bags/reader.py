"""Reading rosbag2 bags (mcap, sqlite3, zstd file/message compression) with rosbags, robust to real-bag quirks.

Quirks handled (shared/fixtures/bags/README.md):

* the metadata's QoS disagrees with the storage file, so rosbags' topic matching yields nothing: detected by
  comparing each connection with the storage's connections, and read from the storage files directly;
* metadata start/duration wrong: nothing here uses them (time spans come from message stamps);
* types with no definition in the bag nor in the default typestore, and service-event schemas rosbags cannot
  parse: the topic is marked unreadable with the reason (a warning), the rest of the bag still reads;
* header stamps on another clock than the bag's receive stamps: both are available (`header_stamp_ns`).

Damaged data: a damaged storage file (what the mcap chunk CRC catches when it is non-zero, a truncated file, a
broken sqlite page) fails the bag. A single damaged message is refused and counted per topic and reason
(`BagSource.refused`), the rest of the bag converts: a storage row whose timestamp is not an integer, CDR that
rosbags cannot parse (sequence or string lengths past the end of the message, a missing string terminator, bytes
left over past what a ROS serializer writes, see `lerobot_bags.cdr`), values no valid message holds (header
nanosec >= 1e9, image data length != height x step, JointState name/position lengths that differ). A changed number
or pixel in a bag without checksums (sqlite3, mcap written with chunk CRC 0, e.g. by rosbags) is indistinguishable
from real data and is converted.

A topic recorded with more than one type (its publisher changed type mid-bag: one connection per type) keeps each
connection's type: every message is decoded with the type it was recorded with (`typed_messages`).
"""

from __future__ import annotations

import contextlib
import struct
import sys
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosbags.interfaces import Connection, MessageDefinitionFormat
from rosbags.rosbag2 import Reader
from rosbags.serde import SerdeError
from rosbags.typesys import Stores, TypesysError, get_types_from_idl, get_types_from_msg, get_typestore

from lerobot_bags import cdr
from lerobot_bags.cdr import implausible
from lerobot_bags.errors import BagError

__all__ = ["CORRUPT_ROW", "BagInfo", "BagSource", "TopicInfo", "implausible"]

if TYPE_CHECKING:
    from rosbags.interfaces.typing import Typesdict
    from rosbags.typesys.store import Typestore

HEADER_TYPE = "std_msgs/msg/Header"
_STAMP = struct.Struct("<iI")
_STAMP_BE = struct.Struct(">iI")


@dataclass
class TopicInfo:
    """One topic of a bag as the converter sees it: `msgtype` is its first connection's type, `types` every type it
    was recorded with (message counts from the metadata), in order."""

    name: str
    msgtype: str
    metadata_count: int
    types: dict[str, int] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # per type: why it cannot be decoded
    header_types: set[str] = field(default_factory=set)  # types whose first field is a std_msgs/Header
    read_count: int = 0

    @property
    def readable(self) -> bool:
        """True when messages of at least one of its types can be decoded."""
        return any(t not in self.problems for t in self.types)

    @property
    def problem(self) -> str:
        """Why (the first of) its types cannot be decoded ('' when all can)."""
        return next(iter(self.problems.values()), "")

    @property
    def has_header(self) -> bool:
        """True when its first type has a std_msgs/Header."""
        return self.msgtype in self.header_types


@dataclass
class BagInfo:
    """What opening a bag found (reported to the user)."""

    path: str
    storage: str
    compression: str
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    direct_storage_read: bool = False


def _cdr_stamp_ns(raw: bytes | memoryview) -> int:
    """The header stamp of a CDR message whose first field is std_msgs/Header (4-byte encapsulation first)."""
    sec, nsec = (_STAMP if raw[1] == 1 else _STAMP_BE).unpack_from(raw, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


class BagSource:
    """An open rosbag2 bag: topic table, typestore, raw message iteration and deserialization."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._reader = Reader(self.path)
            self._reader.open()
        except FileNotFoundError as err:
            raise BagError(f"bag {self.path}: {err}") from None
        except PermissionError as err:
            raise BagError(f"bag {self.path} cannot be read: {err}") from None
        except Exception as err:
            # As in `messages`: a damaged file fails in whichever parser step meets the damage. (One line: YAML
            # errors from rosbags span several.)
            reason = " ".join(str(err).split())
            raise BagError(f"bag {self.path} cannot be opened (truncated or corrupt?): {reason}") from None
        if problem := _metadata_problem(self._reader):
            with contextlib.suppress(AttributeError, TypeError):  # rosbags' close trips on the same fields
                self._reader.close()
            raise BagError(f"bag {self.path}: metadata.yaml is malformed: {problem}; restore or regenerate it")
        storage = type(self._reader.storage).__name__
        kind = {"McapReader": "mcap", "Sqlite3Reader": "sqlite3"}.get(storage, "")
        storages = self._storages()
        if not kind and storages:
            kind = {"McapReader": "mcap", "Sqlite3Reader": "sqlite3"}.get(type(storages[0]).__name__, "?")
        self.info = BagInfo(
            path=str(self.path),
            storage=kind,
            compression=f"{self._reader.compression_mode} {self._reader.compression_format}"
            if self._reader.compression_mode
            else "none",
        )
        self.typestore = self._build_typestore()
        # Per topic: why damaged messages were refused, and how many.
        self.refused: dict[str, Counter[str]] = {}
        self._direct = self._needs_direct_read()
        self.info.direct_storage_read = bool(self._direct)

    def close(self) -> None:
        """Close the underlying reader."""
        if self._reader.is_open:
            self._reader.close()

    def __enter__(self) -> BagSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _storages(self) -> list[Any]:
        storage = self._reader.storage
        return list(getattr(storage, "storages", [storage]))

    def _build_typestore(self) -> Typestore:
        """Default (Humble) types plus every definition the bag carries; unparsable definitions are reported."""
        base = get_typestore(Stores.ROS2_HUMBLE)
        typs: Typesdict = dict(base.fielddefs)
        conns = list(self._reader.connections)
        for storage in self._storages():
            conns.extend(storage.connections)
        bad: dict[str, str] = {}
        for conn in conns:
            if conn.msgdef.format == MessageDefinitionFormat.NONE or conn.msgtype in bad:
                continue
            try:
                typs.update(_parse_definition(conn))
            except (TypesysError, ValueError, AssertionError) as err:
                bad[conn.msgtype] = f"its embedded definition cannot be parsed ({str(err).splitlines()[0][:120]})"
        store = get_typestore(Stores.EMPTY)
        try:
            # Only the bag's types and what they reference: registering a whole distro costs ~0.2 s per bag.
            store.register(_closure(typs, {c.msgtype for c in conns}))
        except TypesysError as err:
            raise BagError(f"bag {self.path}: inconsistent message definitions: {err}") from None
        for conn in self._reader.connections:
            if isinstance(conn.msgcount, bool) or not isinstance(conn.msgcount, int) or conn.msgcount < 0:
                raise BagError(
                    f"bag {self.path}: metadata.yaml gives topic {conn.topic!r} the message_count "
                    f"{str(conn.msgcount)[:40]!r}, not a count; fix or regenerate metadata.yaml (ros2 bag reindex)"
                )
            info = self.info.topics.get(conn.topic)
            if info is None:
                info = TopicInfo(conn.topic, conn.msgtype, conn.msgcount)
                self.info.topics[conn.topic] = info
            else:
                info.metadata_count += conn.msgcount
            known = conn.msgtype in info.types
            info.types[conn.msgtype] = info.types.get(conn.msgtype, 0) + conn.msgcount
            if known:
                continue
            problem = ""
            if conn.msgtype in bad:
                problem = bad[conn.msgtype]
            elif conn.msgtype not in store.fielddefs:
                problem = "the bag has no definition for this type and the default (Humble) typestore lacks it"
            elif (broken := _unbuildable(store, conn.msgtype)) is not None:
                problem = broken
            else:
                fields = store.fielddefs[conn.msgtype][1]
                if fields and fields[0][0] == "header" and _names_type(fields[0][1], HEADER_TYPE):
                    info.header_types.add(conn.msgtype)
            if conn.topic.endswith("/_service_event"):
                problem = "service-event topic (service introspection), not a data stream"
            if problem:
                info.problems[conn.msgtype] = problem
                self.info.warnings.append(f"skipping topic {conn.topic} ({conn.msgtype}): {problem}")
        return store

    def _needs_direct_read(self) -> list[Any] | None:
        """Storage objects to read directly when metadata and storage disagree (rosbags would yield nothing)."""
        storages = self._storages()
        if len(storages) == 1 and storages[0] is self._reader.storage:
            return None
        mismatched = []
        for conn in self._reader.connections:
            if conn.msgcount == 0:
                continue
            if not any(_same_connection(conn, x) for s in storages for x in s.connections):
                mismatched.append(conn.topic)
        if not mismatched:
            return None
        self.info.warnings.append(
            f"metadata.yaml and the storage files disagree on {', '.join(mismatched)} (QoS or type hash): "
            "reading the storage files directly"
        )
        return storages

    def offered_qos(self) -> dict[str, list[Any]]:
        """Per topic, the QoS profiles its publishers offered while recording (metadata; may be empty)."""
        out: dict[str, list[Any]] = {}
        for conn in self._reader.connections:
            out.setdefault(conn.topic, []).extend(getattr(conn.ext, "offered_qos_profiles", None) or [])
        return out

    def check_topic(self, topic: str, msgtype: str) -> TopicInfo:
        """The topic's info, or BagError when it is missing, never carries `msgtype` or cannot be decoded.

        A topic recorded with `msgtype` and other types passes (its other messages are skipped by the reader's
        callers, see `typed_messages`)."""
        info = self.info.topics.get(topic)
        if info is None:
            have = ", ".join(sorted(self.info.topics)) or "none"
            raise BagError(f"bag {self.path} has no topic {topic} (topics: {have})")
        if msgtype not in info.types:
            raise BagError(
                f"bag {self.path}: topic {topic} carries {', '.join(info.types)}, the contract expects {msgtype}"
            )
        if msgtype in info.problems:
            raise BagError(f"bag {self.path}: topic {topic} cannot be decoded: {info.problems[msgtype]}")
        return info

    def fielddefs(self, msgtype: str) -> list[tuple[str, Any]]:
        """The field definitions of `msgtype` in this bag's typestore."""
        return list(self.typestore.fielddefs[msgtype][1])

    def messages(self, topics: Collection[str]) -> Iterator[tuple[str, int, bytes | memoryview]]:
        """(topic, receive stamp ns, raw CDR) for `topics`, in storage order."""
        for topic, _, stamp, raw in self.typed_messages(topics):
            yield topic, stamp, raw

    def typed_messages(self, topics: Collection[str]) -> Iterator[tuple[str, str, int, bytes | memoryview]]:
        """(topic, message type, receive stamp ns, raw CDR) for `topics`, in storage order; the type is the one
        the message's connection was recorded with."""
        try:
            if self._direct is None:
                conns = [c for c in self._reader.connections if c.topic in topics]
                for conn, stamp, raw in self._reader.messages(connections=conns):
                    self.info.topics[conn.topic].read_count += 1
                    if _storage_row_ok(stamp, raw):
                        yield conn.topic, conn.msgtype, stamp, raw
                    else:
                        self.refuse(conn.topic, CORRUPT_ROW)
            else:
                yield from self._direct_messages(topics)
        except BagError:
            raise
        except Exception as err:
            # Corrupt storage surfaces as whatever the parser trips on (ReaderError, OverflowError, struct.error,
            # apsw/zstd errors, ...); all of them mean the same thing to the user.
            raise BagError(f"bag {self.path} is truncated or corrupt: {type(err).__name__}: {err}") from None

    def _direct_messages(self, topics: Collection[str]) -> Iterator[tuple[str, str, int, bytes | memoryview]]:
        per_message = self._reader.compression_mode == "message"
        assert self._direct is not None
        for storage in self._direct:
            conns = [c for c in storage.connections if c.topic in topics]
            if not conns:
                continue
            for conn, stamp, raw in storage.messages(conns):
                self.info.topics[conn.topic].read_count += 1
                if _storage_row_ok(stamp, raw):
                    yield conn.topic, conn.msgtype, stamp, _zstd_decompress(raw) if per_message else raw
                else:
                    self.refuse(conn.topic, CORRUPT_ROW)

    def refuse(self, topic: str, reason: str) -> None:
        """Count a damaged message of `topic` that is left out (reported per topic and reason)."""
        self.refused.setdefault(topic, Counter())[reason] += 1

    def refused_warnings(self) -> list[str]:
        """One line per topic and reason of the refused messages."""
        return [
            f"{topic}: refused {count} damaged message(s): {reason}"
            for topic, reasons in sorted(self.refused.items())
            for reason, count in reasons.most_common()
        ]

    def checked_message(
        self, raw: bytes | memoryview, topic: str, msgtype: str | None = None
    ) -> tuple[object | None, str | None]:
        """(message, None) for a sound message of `topic` (of type `msgtype`, default: the topic's first type),
        (None, reason) for a damaged one (`lerobot_bags.cdr.checked_message`: the same checks as the live
        recorder's)."""
        return cdr.checked_message(self.typestore, _view(raw), msgtype or self.info.topics[topic].msgtype)

    def deserialize(self, raw: bytes | memoryview, msgtype: str) -> object:
        """A message object (rosbags dataclass) from raw CDR."""
        try:
            return cdr.deserialize_cdr(self.typestore, _view(raw), msgtype)
        except SerdeError as err:
            raise BagError(f"bag {self.path}: a {msgtype} message cannot be deserialized: {err}") from None

    def header_stamp_ns(self, raw: bytes | memoryview, topic: str, msgtype: str | None = None) -> int:
        """The message's header stamp, read from the CDR bytes without deserializing the rest."""
        msgtype = msgtype or self.info.topics[topic].msgtype
        if msgtype not in self.info.topics[topic].header_types:
            raise BagError(
                f"bag {self.path}: {topic} ({msgtype}) has no std_msgs/Header; "
                "use --stamp receive (or `stamp: receive` in the contract)"
            )
        try:
            return _cdr_stamp_ns(raw)
        except struct.error:
            raise BagError(f"bag {self.path}: a {topic} message is too short to hold a header") from None

    def count_warnings(self, topics: Collection[str]) -> list[str]:
        """Topics whose read count differs from metadata.yaml's message_count (after a full read)."""
        out = []
        for topic in topics:
            info = self.info.topics[topic]
            if info.read_count != info.metadata_count:
                out.append(f"{topic}: read {info.read_count} messages, metadata.yaml says {info.metadata_count}")
        return out


def _view(raw: bytes | memoryview) -> memoryview:
    """rosbags slices the CDR after its 4-byte header: on bytes that copies the message (~0.4 ms per 640x480
    image), on a memoryview it does not (arrays in the message then view `raw`)."""
    return raw if isinstance(raw, memoryview) else memoryview(raw)


CORRUPT_ROW = "storage row with a non-integer timestamp or non-binary data (damaged storage)"


def _storage_row_ok(stamp: object, raw: object) -> bool:
    """A damaged sqlite page can hand back a timestamp as bytes or text, or data as a number."""
    return isinstance(stamp, int) and not isinstance(stamp, bool) and isinstance(raw, (bytes, memoryview))


def _unbuildable(store: Typestore, msgtype: str) -> str | None:
    """Why rosbags cannot build a (de)serializer for `msgtype` (a definition naming a type nobody defines,
    e.g. a damaged embedded definition), or None."""
    try:
        store.get_msgdef(msgtype)
    except (KeyError, TypesysError, ValueError, AssertionError) as err:
        return f"its definition refers to a type no definition gives ({str(err).strip()[:120]})"
    return None


def _metadata_problem(reader: Reader) -> str:
    """What rosbags accepted from metadata.yaml but the rest of the reader relies on (empty when sound)."""
    for holder in (reader, getattr(reader, "storage", None)):
        files: object = getattr(holder, "files", [])  # rosbags keeps metadata.yaml's `files` here, unchecked
        if not isinstance(files, list):
            return f"`files` is {type(files).__name__}, not a list"
    for conn in reader.connections:
        for name in ("topic", "msgtype"):
            value = getattr(conn, name)
            if not isinstance(value, str) or not value:
                return f"a topic entry's {'name' if name == 'topic' else 'type'} is {value!r}, not a name"
    return ""


def _closure(typs: Typesdict, roots: set[str]) -> Typesdict:
    """The definitions of `roots` and of every type they reference (those `typs` knows)."""
    out: Typesdict = {}
    todo = [r for r in roots if r in typs]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out[name] = typs[name]
        for _, fieldtype in typs[name][1]:
            node: Any = fieldtype
            ref = node[1] if node[0].name == "NAME" else None
            if node[0].name in ("ARRAY", "SEQUENCE") and node[1][0][0].name == "NAME":
                ref = node[1][0][1]
            if isinstance(ref, str) and ref in typs and ref not in out:
                todo.append(ref)
    return out


def _zstd_decompress(raw: bytes | memoryview) -> bytes:
    """Undo rosbag2's per-message zstd compression (the module rosbags itself uses)."""
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    return bytes(zstd.decompress(raw))


def _names_type(fieldtype: Any, name: str) -> bool:
    """True when a rosbags field type descriptor refers to message type `name`."""
    try:
        return bool(fieldtype[1] == name)
    except (TypeError, IndexError):
        return False


def _same_connection(meta: Connection, storage: Connection) -> bool:
    """rosbags' own rule for pairing a metadata connection with a storage connection."""
    return (
        meta.topic == storage.topic
        and meta.msgtype == storage.msgtype
        and meta.ext == storage.ext
        and (not meta.digest or not storage.digest or meta.digest == storage.digest)
    )


def _parse_definition(conn: Connection) -> Typesdict:
    if conn.msgdef.format == MessageDefinitionFormat.MSG:
        return get_types_from_msg(conn.msgdef.data, conn.msgtype)
    sep = "=" * 80 + "\n"
    typs: Typesdict = {}
    data = conn.msgdef.data
    parts = [p.split("\n", 1)[1] for p in data.split(sep)[1:]] if data.startswith(f"{sep}IDL: ") else [data]
    for idl in parts:
        typs.update(get_types_from_idl(idl))
    return typs
