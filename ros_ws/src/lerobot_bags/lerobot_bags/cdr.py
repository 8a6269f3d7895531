"""CDR messages as ROS middlewares write them: deserialization and the checks of the bag converter and the recorder.

rosbags' `Typestore.deserialize_cdr` refuses a message with more than 3 bytes after its last field ("CDR message
size mismatch"). ROS itself writes more in one place: `rclpy.serialization.serialize_message` (rmw_serialize,
what a raw publisher sends and what `rosbag2_py` writers are given) sizes the buffer with the type support's
*estimate* and hands the whole buffer on. With rmw_fastrtps (and the other middlewares built on the same
`rosidl_typesupport_fastrtps` estimate) the estimate aligns every sequence of 8-byte numbers to 8, also an
empty one, which the serializer itself does not: a JointState with empty `velocity` and `effort` comes out 8 bytes
longer than its fields, a Float64MultiArray without data 4 bytes, a fixed-size type (Bool) rounded up to a
multiple of 4. The bytes past the fields are not written (whatever the buffer held: not zeros). A typed publish
sends the exact fields, so `ros2 bag record` of a typed publisher stores no such bytes; a raw publisher's bytes
reach raw subscriptions (the recorder, rosbag2) unchanged.

ROS deserializers read the fields and ignore what follows. `deserialize_cdr` accepts what a ROS serializer
writes: up to 3 bytes after the fields (rosbags' own allowance: padding to 4), or up to the length that
estimate gives for the message; a longer message is refused as damaged.
"""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING, Any

from rosbags.serde import SerdeError

from lerobot_contract.time import NS

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

# Bytes after the last field that rosbags (and every middleware padding to 4) allows.
PAD_TO_4 = 3
_ENCAPSULATION = 4
_PADDING = 4  # sequence lengths and string lengths are uint32
_SIZES = {
    "bool": 1,
    "byte": 1,
    "char": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
}
# What rosbags' generated deserializers raise on bytes that do not parse.
_PARSE_ERRORS = (struct.error, UnicodeDecodeError, ValueError, IndexError, OverflowError)


def _align(offset: int, size: int) -> int:
    """fastcdr's `Cdr::alignment`: the padding before a `size`-byte value at `offset`."""
    return (size - offset % size) & (size - 1) if size > 1 else 0


def rmw_serialized_size(store: Typestore, msgtype: str, msg: Any) -> int:
    """The length (encapsulation included) rmw_serialize gives `msg`: rosidl_typesupport_fastrtps's
    `get_serialized_size`, which aligns the elements of a sequence even when it is empty."""
    return _ENCAPSULATION + _estimate(store, msgtype, msg, 0)


def _estimate(store: Typestore, msgtype: str, msg: Any, offset: int) -> int:
    for name, (kind, detail) in store.fielddefs[msgtype][1]:
        offset = _field_estimate(store, kind.name, detail, getattr(msg, name), offset)
    return offset


def _field_estimate(store: Typestore, kind: str, detail: Any, value: Any, offset: int) -> int:
    if kind == "NAME":
        return _estimate(store, detail, value, offset)
    if kind == "BASE":
        if detail[0] in ("string", "wstring"):
            return offset + _PADDING + _align(offset, _PADDING) + _text_size(detail[0], value)
        size = _SIZES[detail[0]]
        return offset + size + _align(offset, size)
    (element_kind, element), _ = detail
    if kind == "SEQUENCE":
        offset += _PADDING + _align(offset, _PADDING)
    if element_kind.name == "BASE" and element[0] in _SIZES:
        size = _SIZES[element[0]]
        return offset + len(value) * size + _align(offset, size)
    for item in value:
        offset = _field_estimate(store, element_kind.name, element, item, offset)
    return offset


def _text_size(kind: str, text: str) -> int:
    return len(text.encode()) + 1 if kind == "string" else 4 * (len(text) + 1)


def deserialize_cdr(store: Typestore, raw: bytes | memoryview, msgtype: str) -> Any:
    """The message `raw` holds; SerdeError when it does not parse or is longer than a ROS serializer writes it.

    On a memoryview the message's arrays view `raw` (no copy of image data).
    """
    view = raw if isinstance(raw, memoryview) else memoryview(raw)
    if len(view) < _ENCAPSULATION or bytes(view[:2]) not in (b"\x00\x00", b"\x00\x01"):
        raise SerdeError("Invalid or unsupported CDR encapsulation.")
    msgdef = store.get_msgdef(msgtype)
    func = msgdef.deserialize_cdr_le if view[1] else msgdef.deserialize_cdr_be
    try:
        msg, end = func(view[_ENCAPSULATION:], 0, msgdef.cls, store)
    except _PARSE_ERRORS as err:
        raise SerdeError(f"Could not deserialize {msgtype!r}: {err}") from None
    end += _ENCAPSULATION
    if len(view) - end > PAD_TO_4:
        limit = rmw_serialized_size(store, msgtype, msg)
        if len(view) > limit:
            raise SerdeError(
                f"CDR message size mismatch for {msgtype!r}: {len(view) - end} bytes after its fields, a ROS "
                f"serializer writes at most {max(limit - end, PAD_TO_4)}"
            )
    return msg


def implausible(msg: Any, msgtype: str) -> str | None:
    """Why a parsed message cannot be what a publisher sent (None when nothing is wrong)."""
    header = getattr(msg, "header", None)
    stamp = getattr(header, "stamp", None)
    if stamp is not None and not 0 <= getattr(stamp, "nanosec", 0) < NS:
        return "header stamp nanosec out of range (>= 1e9)"
    if msgtype == "sensor_msgs/msg/Image":
        if msg.height * msg.step != len(msg.data):
            return "image data length differs from height x step"
        if msg.step < msg.width:
            return "image step smaller than its width"
    elif msgtype == "sensor_msgs/msg/CompressedImage":
        if len(msg.data) == 0:
            return "compressed image without data"
    elif msgtype == "sensor_msgs/msg/JointState":
        for name in ("position", "velocity", "effort"):
            values = getattr(msg, name)
            if len(values) and len(values) != len(msg.name):
                return f"JointState {name} and name lengths differ"
    return None


def checked_message(store: Typestore, raw: bytes | memoryview, msgtype: str) -> tuple[Any | None, str | None]:
    """(message, None) for a sound message, (None, why it is damaged) otherwise: `deserialize_cdr`'s checks
    (encapsulation, string terminators, lengths within the message, nothing past what a serializer writes) and
    values no valid message holds (`implausible`). The reason carries no offsets, so equal damage counts once."""
    try:
        msg = deserialize_cdr(store, raw, msgtype)
    except SerdeError as err:
        text = str(err).splitlines()[0] if str(err) else type(err).__name__
        return None, f"malformed CDR ({_without_numbers(text)[:100]})"
    reason = implausible(msg, msgtype)
    return (None, reason) if reason else (msg, None)


def _without_numbers(text: str) -> str:
    return re.sub(r"\d+", "N", text)
