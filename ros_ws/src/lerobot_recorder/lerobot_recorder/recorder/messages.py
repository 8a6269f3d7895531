"""Raw (CDR) messages of live subscriptions: header stamps and deserialization with rosbags' typestore.

The recorder subscribes with ``raw=True``: images stay serialized bytes until a frame needs them, and are
then deserialized by rosbags (numpy views, no per-byte Python objects). Types the stock typestore lacks
(interface packages of the workspace) are registered from the ``.msg`` files installed under
``<prefix>/share/<package>/msg/``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from lerobot_recorder.recorder.errors import RecorderError

_STAMP_LE = struct.Struct("<iI")
_STAMP_BE = struct.Struct(">iI")
HEADER_TYPE = "std_msgs/msg/Header"


def header_stamp_ns(raw: bytes | memoryview) -> int:
    """The stamp of a CDR message whose first field is a std_msgs/Header (after the 4-byte encapsulation)."""
    if len(raw) < 12:
        raise RecorderError(f"a {len(raw)}-byte message is too short to hold a header stamp")
    sec, nsec = (_STAMP_LE if raw[1] == 1 else _STAMP_BE).unpack_from(raw, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


def build_typestore(msgtypes: Iterable[str], prefixes: Sequence[str | Path] = ()) -> Typestore:
    """The Kilted typestore plus every package (from `prefixes`) that defines one of `msgtypes` it lacks."""
    store = get_typestore(Stores.ROS2_KILTED)
    missing = sorted({t for t in msgtypes if t not in store.fielddefs})
    packages = sorted({t.split("/")[0] for t in missing})
    for package in packages:
        store.register(_package_types(package, prefixes))
    still = [t for t in missing if t not in store.fielddefs]
    if still:
        where = ", ".join(str(p) for p in prefixes) or "no prefix given"
        raise RecorderError(
            f"no definition for {', '.join(still)} (searched share/<package>/msg under {where}); "
            "install the interface package or source its workspace (AMENT_PREFIX_PATH)"
        )
    return store


def _package_types(package: str, prefixes: Sequence[str | Path]) -> dict[str, Any]:
    types: dict[str, Any] = {}
    for prefix in prefixes:
        folder = Path(prefix) / "share" / package / "msg"
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.msg")):
            try:
                types.update(get_types_from_msg(path.read_text(), f"{package}/msg/{path.stem}"))
            except TypesysError as err:
                raise RecorderError(f"cannot parse {path}: {err}") from None
        break
    return types


def has_header(store: Typestore, msgtype: str) -> bool:
    """True when the first field of `msgtype` is a std_msgs/Header named `header`."""
    fields = store.fielddefs[msgtype][1]
    if not fields or fields[0][0] != "header":
        return False
    node = fields[0][1]
    return bool(node[0].name == "NAME" and node[1] == HEADER_TYPE)


class SequenceGaps:
    """Messages lost on the way to a subscription, from the publishers' sequence numbers (rclpy's MessageInfo).

    DDS numbers each writer's samples 1, 2, 3, ...; a subscription whose KEEP_LAST queue overflowed (the node was
    busy) or whose best-effort transport dropped samples sees a gap. Tracked per topic and publisher (its GID), so
    several publishers on one topic do not look like gaps. A number that does not follow on (a publisher that
    restarted with the same GID, a middleware without sequence numbers: None) starts the count afresh.
    """

    def __init__(self) -> None:
        self._last: dict[tuple[str, bytes], int] = {}

    def lost(self, topic: str, publisher: bytes, sequence: int | None) -> int:
        """Messages of `publisher` on `topic` sent between the previous one seen and this one (`sequence`)."""
        if sequence is None:
            return 0
        key = (topic, publisher)
        last = self._last.get(key)
        self._last[key] = sequence
        if last is None or sequence <= last:
            return 0
        return sequence - last - 1

    def lost_from_info(self, topic: str, info: Any) -> int:
        """`lost` from an rclpy MessageInfo (a dict: `publication_sequence_number`, `publisher_gid`)."""
        gid = info.get("publisher_gid") or {}
        publisher = bytes(gid.get("data", b"")) if isinstance(gid, dict) else b""
        return self.lost(topic, publisher, info.get("publication_sequence_number"))
