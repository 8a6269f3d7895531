"""Convert ROS 2 messages to plain Python values and YAML text, and fill messages from them.

Works on any rosidl-generated Python message class through its introspection API
(`get_fields_and_field_types()` for the field names in `.msg` order, `SLOT_TYPES` for their
types) and imports no rclpy, so it serves the CLI (`lerobot-ros topic echo/pub`), converters and
tests alike.

Conventions, chosen to read like `ros2 topic echo` / `ros2 topic pub`:

- `message_to_dict` returns a dict in field order; nested messages become dicts, arrays and
  sequences (Python lists, `array.array`, numpy arrays, `bytes`) become lists, single `byte`
  (octet) values and `byte[]` elements become ints 0..255, `builtin_interfaces` Time/Duration stay
  `{sec, nanosec}` mappings. `truncate_length` cuts long arrays and strings and marks the cut with
  `'...'`; `no_arr` / `no_str` replace them by a short description.
- `fill_message` / `message_from_dict` take a mapping of field names to values; nested messages
  take mappings (fields not given keep their values); arrays take lists, tuples, numpy arrays
  (flattened in row-major order) or, for byte/uint8 arrays, `bytes`; a Time or Duration also takes
  a number of seconds, a Time takes `now`, and a `std_msgs/Header` takes `auto` (stamp = now).
  Errors name the field and the message type.
"""

from __future__ import annotations

import array
import difflib
import importlib
import math
import numbers
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml
from rosidl_parser import definition as idl

from lerobot_ros.bounded_yaml import load_yaml

INTERFACE_KINDS = ("msg", "srv", "action")
TRUNCATION_MARKER = "..."

_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "short": (-(2**15), 2**15 - 1),
    "unsigned short": (0, 2**16 - 1),
    "long": (-(2**31), 2**31 - 1),
    "unsigned long": (0, 2**32 - 1),
    "long long": (-(2**63), 2**63 - 1),
    "unsigned long long": (0, 2**64 - 1),
}
_FLOAT_TYPES = frozenset({"float", "double", "long double"})
_FLOAT32_MAX = 3.4028234663852886e38
_NS_PER_S = 1_000_000_000


class MessageConversionError(ValueError):
    """A value cannot be converted to or from a ROS message."""


class MessageTypeError(MessageConversionError):
    """A message type name is malformed or names no installed message class."""


class UnknownFieldError(MessageConversionError):
    """A mapping names a field that the message does not have."""


class FieldValueError(MessageConversionError):
    """A value does not fit the type of the field it is given for."""


@dataclass(frozen=True)
class MessageField:
    """One field of a message class: its name and its rosidl type (a `rosidl_parser.definition` type)."""

    name: str
    type: Any


def is_message_class(obj: object) -> bool:
    """True for a rosidl-generated message class (not an instance)."""
    return isinstance(obj, type) and hasattr(obj, "get_fields_and_field_types") and hasattr(obj, "SLOT_TYPES")


def is_message(obj: object) -> bool:
    """True for an instance of a rosidl-generated message class."""
    return is_message_class(type(obj))


def message_fields(msg_or_class: Any) -> tuple[MessageField, ...]:
    """The fields of a message class or instance, in `.msg` order."""
    cls: Any = msg_or_class if isinstance(msg_or_class, type) else type(msg_or_class)
    if not is_message_class(cls):
        raise MessageTypeError(f"{cls.__module__}.{cls.__qualname__} is not a rosidl-generated message class")
    names = list(cls.get_fields_and_field_types())
    slot_types = list(cls.SLOT_TYPES)
    if len(names) != len(slot_types):
        raise MessageTypeError(
            f"{message_type_name(cls)}: {len(names)} field names but {len(slot_types)} slot types; "
            "regenerate the interface package"
        )
    return tuple(MessageField(name, slot_type) for name, slot_type in zip(names, slot_types, strict=True))


def message_type_name(msg_or_class: Any) -> str:
    """Full type name of a message class or instance, e.g. `sensor_msgs/msg/JointState`."""
    cls = msg_or_class if isinstance(msg_or_class, type) else type(msg_or_class)
    parts = cls.__module__.split(".")
    if len(parts) >= 2 and parts[1] in INTERFACE_KINDS:
        return f"{parts[0]}/{parts[1]}/{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def parse_type_name(name: str) -> tuple[str, str, str]:
    """Split `pkg/msg/Type` or `pkg/Type` into (package, kind, type); `pkg/Type` means kind `msg`."""
    parts = name.strip().split("/")
    if len(parts) == 2:
        parts.insert(1, "msg")
    if len(parts) != 3 or parts[1] not in INTERFACE_KINDS or not all(p.isidentifier() for p in parts):
        raise MessageTypeError(
            f"invalid message type {name!r}: expected 'package/msg/Type' or 'package/Type' (e.g. std_msgs/msg/String)"
        )
    return parts[0], parts[1], parts[2]


def import_message_type(name: str) -> type:
    """The message class named `pkg/msg/Type` or `pkg/Type`, imported from the module `pkg.msg`."""
    package, kind, type_name = parse_type_name(name)
    module_name = f"{package}.{kind}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name not in (package, module_name):
            raise
        raise MessageTypeError(
            f"unknown message type {name!r}: no Python module {module_name!r}; "
            f"install or build the interface package {package!r} into this environment"
        ) from None
    cls = getattr(module, type_name, None)
    if not is_message_class(cls):
        available = sorted(n for n, obj in vars(module).items() if is_message_class(obj))
        hint = difflib.get_close_matches(type_name, available, n=1)
        suggestion = f" (did you mean {package}/{kind}/{hint[0]}?)" if hint else ""
        raise MessageTypeError(
            f"unknown message type {name!r}: {module_name} has no message {type_name!r}{suggestion}; "
            f"it has: {', '.join(available) or 'none'}"
        )
    assert isinstance(cls, type)
    return cls


def field_type(cls: type, path: str) -> Any:
    """The rosidl type at dotted `path` inside message class `cls` (a number steps into an array's elements):
    `field_type(JointTrajectory, "points.0.positions")` is `sequence<double>` (UnknownFieldError naming the part)."""
    current: Any = cls
    slot: Any = None
    walked: list[str] = []
    for part in path.split("."):
        if part.isdigit():
            if not isinstance(slot, idl.AbstractNestedType):
                raise UnknownFieldError(f"invalid field path {path!r}: {'.'.join(walked)!r} is not an array")
            slot = slot.value_type
        else:
            if not is_message_class(current):
                raise UnknownFieldError(f"invalid field path {path!r}: {'.'.join(walked)!r} has no fields")
            fields = {f.name: f.type for f in message_fields(current)}
            if part not in fields:
                raise UnknownFieldError(_unknown_field_message(path, walked, part, list(fields)))
            slot = fields[part]
        current = _class_of(slot) if isinstance(slot, idl.NamespacedType) else None
        walked.append(part)
    return slot


def is_array_type(slot_type: Any) -> bool:
    """True for array, bounded and unbounded sequence types (not strings)."""
    return isinstance(slot_type, idl.AbstractNestedType)


def _class_of(namespaced: Any) -> type:
    module = importlib.import_module(".".join(namespaced.namespaces))
    cls = getattr(module, namespaced.name)
    assert isinstance(cls, type)
    return cls


def _is_builtin_interface(slot_type: Any, package: str, name: str) -> bool:
    return (
        isinstance(slot_type, idl.NamespacedType)
        and slot_type.name == name
        and list(slot_type.namespaces) == [package, "msg"]
    )


def describe_type(slot_type: Any) -> str:
    """The `.msg`-style name of a rosidl type: `double`, `string<=10`, `std_msgs/msg/Header`, `double[9]`..."""
    if isinstance(slot_type, idl.NamespacedType):
        return "/".join([*slot_type.namespaces, slot_type.name])
    if isinstance(slot_type, idl.BoundedString | idl.BoundedWString):
        base = "string" if isinstance(slot_type, idl.BoundedString) else "wstring"
        return f"{base}<={slot_type.maximum_size}"
    if isinstance(slot_type, idl.AbstractString):
        return "string"
    if isinstance(slot_type, idl.AbstractWString):
        return "wstring"
    if isinstance(slot_type, idl.Array):
        return f"{describe_type(slot_type.value_type)}[{slot_type.size}]"
    if isinstance(slot_type, idl.BoundedSequence):
        return f"{describe_type(slot_type.value_type)}[<={slot_type.maximum_size}]"
    if isinstance(slot_type, idl.UnboundedSequence):
        return f"{describe_type(slot_type.value_type)}[]"
    if isinstance(slot_type, idl.BasicType):
        return str(slot_type.typename)
    return str(slot_type)


@dataclass(frozen=True)
class _DictOptions:
    truncate_length: int | None
    no_arr: bool
    no_str: bool


def message_to_dict(
    msg: Any, *, truncate_length: int | None = None, no_arr: bool = False, no_str: bool = False
) -> dict[str, Any]:
    """The fields of `msg` as a dict of plain Python values, in `.msg` order (see the module doc)."""
    if truncate_length is not None and truncate_length < 0:
        raise ValueError(f"truncate_length must be >= 0, got {truncate_length}")
    return _message_to_dict(msg, _DictOptions(truncate_length, no_arr, no_str))


def _message_to_dict(msg: Any, options: _DictOptions) -> dict[str, Any]:
    return {f.name: _value_to_plain(getattr(msg, f.name), f.type, options) for f in message_fields(msg)}


def _value_to_plain(value: Any, slot_type: Any, options: _DictOptions) -> Any:
    if isinstance(slot_type, idl.NamespacedType):
        return _message_to_dict(value, options)
    if isinstance(slot_type, idl.AbstractNestedType):
        return _array_to_plain(value, slot_type, options)
    if isinstance(slot_type, idl.AbstractGenericString):
        text = str(value)
        if options.no_str:
            return f"<string length: {len(text)}>"
        limit = options.truncate_length
        return text if limit is None or len(text) <= limit else text[:limit] + TRUNCATION_MARKER
    return _scalar_to_plain(value)


def _array_to_plain(value: Any, slot_type: Any, options: _DictOptions) -> Any:
    element_type = slot_type.value_type
    if options.no_arr:
        if isinstance(slot_type, idl.Array):
            return f"<array type: {describe_type(slot_type)}>"
        return f"<sequence type: {describe_type(element_type)}, length: {len(value)}>"
    limit = options.truncate_length
    truncated = limit is not None and len(value) > limit
    items = value[:limit] if truncated else value
    if isinstance(items, np.ndarray | array.array):
        plain: list[Any] = items.tolist()
    elif isinstance(items, bytes | bytearray):
        plain = list(items)
    elif isinstance(element_type, idl.BasicType):
        plain = [_scalar_to_plain(v) for v in items]
    else:
        plain = [_value_to_plain(v, element_type, options) for v in items]
    if truncated:
        plain.append(TRUNCATION_MARKER)
    return plain


def _scalar_to_plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value[0] if len(value) == 1 else list(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def to_yaml(data: Any, *, flow_style: bool = False) -> str:
    """Dump plain values (from `message_to_dict`) as YAML in field order, never wrapping lines."""
    return yaml.dump(
        data,
        Dumper=yaml.SafeDumper,
        default_flow_style=flow_style,
        sort_keys=False,
        width=sys.maxsize,
        allow_unicode=True,
    )


def message_to_yaml(
    msg: Any,
    *,
    truncate_length: int | None = None,
    no_arr: bool = False,
    no_str: bool = False,
    flow_style: bool = False,
) -> str:
    """`msg` as YAML text, fields in `.msg` order, the way `ros2 topic echo` prints it."""
    return to_yaml(
        message_to_dict(msg, truncate_length=truncate_length, no_arr=no_arr, no_str=no_str), flow_style=flow_style
    )


def plain_to_csv(value: Any) -> str:
    """Plain values flattened into one comma-separated line (nested fields in order), like `--csv`."""
    return ",".join(_csv_cells(value))


def _csv_cells(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _csv_cells(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _csv_cells(item)
    else:
        yield str(value)


def message_to_csv(msg: Any, *, truncate_length: int | None = None, no_arr: bool = False, no_str: bool = False) -> str:
    """`msg` as one comma-separated line of all its (recursive) field values."""
    return plain_to_csv(message_to_dict(msg, truncate_length=truncate_length, no_arr=no_arr, no_str=no_str))


def get_field(value: Any, path: str) -> Any:
    """The value at a dotted `path` (`header.stamp`, `position.0`) inside a message or plain dict."""
    current = value
    walked: list[str] = []
    for part in path.split("."):
        if not part:
            raise UnknownFieldError(f"invalid field path {path!r}: empty component; use names like 'header.stamp'")
        if isinstance(current, Mapping):
            if part not in current:
                raise UnknownFieldError(_unknown_field_message(path, walked, part, list(current)))
            current = current[part]
        elif is_message(current):
            names = [f.name for f in message_fields(current)]
            if part not in names:
                raise UnknownFieldError(_unknown_field_message(path, walked, part, names))
            current = getattr(current, part)
        elif isinstance(current, Sequence | np.ndarray | array.array) and not isinstance(current, str):
            try:
                current = current[int(part)]
            except (ValueError, IndexError):
                raise UnknownFieldError(
                    f"invalid field path {path!r}: {'.'.join(walked)!r} is an array of {len(current)} elements; "
                    f"{part!r} is not an index in 0..{len(current) - 1}"
                ) from None
        else:
            raise UnknownFieldError(
                f"invalid field path {path!r}: {'.'.join(walked)!r} is a {type(current).__name__} and has no fields"
            )
        walked.append(part)
    return current


def _unknown_field_message(path: str, walked: list[str], part: str, names: list[str]) -> str:
    where = f" of {'.'.join(walked)!r}" if walked else ""
    return f"invalid field path {path!r}: no field {part!r}{where}; fields are: {', '.join(names)}"


def parse_yaml_mapping(text: str) -> dict[str, Any]:
    """Parse YAML text (`'{data: hello}'` or `'data: hello'`) into a mapping; empty text is `{}`."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise MessageConversionError(
            f"malformed YAML{where}: {problem}; write the values as a YAML mapping, e.g. '{{data: hello}}'"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MessageConversionError(
            f"expected a YAML mapping of field names to values (e.g. '{{data: hello}}'), got {_describe(data)}"
        )
    return data


@dataclass(frozen=True)
class _FillContext:
    root_type: str
    now_ns: Callable[[], int]

    def path(self, parent: str, child: str | int) -> str:
        if isinstance(child, int):
            return f"{parent}[{child}]"
        return f"{parent}.{child}" if parent else child

    def value_error(self, path: str, expected: str, value: Any) -> FieldValueError:
        return FieldValueError(
            f"invalid value for field {path!r} of {self.root_type}: expected {expected}, got {_describe(value)}"
        )


def fill_message(msg: Any, values: Mapping[str, Any], *, now_ns: Callable[[], int] = time.time_ns) -> Any:
    """Set the fields of `msg` named in `values` (see the module doc); returns `msg`.

    `now_ns` gives the time, in nanoseconds, used for `now` / `auto` stamps.
    """
    _fill(msg, values, "", _FillContext(message_type_name(msg), now_ns))
    return msg


def message_from_dict(cls: type, values: Mapping[str, Any], *, now_ns: Callable[[], int] = time.time_ns) -> Any:
    """A new message of class `cls` with the fields named in `values` set, the others default."""
    return fill_message(cls(), values, now_ns=now_ns)


def message_from_yaml(cls: type, text: str, *, now_ns: Callable[[], int] = time.time_ns) -> Any:
    """A new message of class `cls` filled from YAML text such as `'{data: hello}'`."""
    return message_from_dict(cls, parse_yaml_mapping(text), now_ns=now_ns)


def _fill(msg: Any, values: Any, path: str, ctx: _FillContext) -> None:
    fields = {f.name: f for f in message_fields(msg)}
    if not isinstance(values, Mapping):
        example = next(iter(fields), "field")
        what = f"a mapping of field names to values (e.g. {{{example}: ...}}) for {message_type_name(msg)}"
        if path:
            raise ctx.value_error(path, what, values)
        raise FieldValueError(f"{ctx.root_type}: expected {what}, got {_describe(values)}")
    for key, value in values.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            raise UnknownFieldError(_unknown_key_message(ctx, path, key, msg, list(fields)))
        field_path = ctx.path(path, key)
        converted = _convert(value, field.type, getattr(msg, key), field_path, ctx)
        try:
            setattr(msg, key, converted)
        except (AssertionError, TypeError, ValueError) as err:
            # The generated setters assert what the conversion above did not check.
            raise ctx.value_error(field_path, f"a value of type {describe_type(field.type)} ({err})", value) from None


def _unknown_key_message(ctx: _FillContext, path: str, key: object, msg: Any, names: list[str]) -> str:
    hint = difflib.get_close_matches(str(key), names, n=1)
    suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
    if not path:
        return f"unknown field {key!r} in {ctx.root_type}; fields are: {', '.join(names)}{suggestion}"
    return (
        f"unknown field {ctx.path(path, str(key))!r} in {ctx.root_type}; "
        f"fields of {path!r} ({message_type_name(msg)}) are: {', '.join(names)}{suggestion}"
    )


def _convert(value: Any, slot_type: Any, current: Any, path: str, ctx: _FillContext) -> Any:
    if isinstance(slot_type, idl.NamespacedType):
        return _convert_message(value, slot_type, current, path, ctx)
    if isinstance(slot_type, idl.AbstractNestedType):
        return _convert_array(value, slot_type, current, path, ctx)
    if isinstance(slot_type, idl.AbstractGenericString):
        return _convert_string(value, slot_type, path, ctx)
    return _convert_basic(value, slot_type.typename, path, ctx)


def _convert_message(value: Any, slot_type: Any, current: Any, path: str, ctx: _FillContext) -> Any:
    cls = type(current) if current is not None else _class_of(slot_type)
    if isinstance(value, cls):
        return value
    is_time = _is_builtin_interface(slot_type, "builtin_interfaces", "Time")
    is_duration = _is_builtin_interface(slot_type, "builtin_interfaces", "Duration")
    if (is_time or is_duration) and not isinstance(value, Mapping):
        if is_time and isinstance(value, str) and value == "now":
            total_ns = ctx.now_ns()
        elif isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
            total_ns = round(float(value) * _NS_PER_S)
        else:
            what = "a number of seconds, 'now' or {sec: ..., nanosec: ...}" if is_time else "a number of seconds"
            raise ctx.value_error(path, f"{what} for {describe_type(slot_type)}", value)
        sec, nanosec = divmod(total_ns, _NS_PER_S)
        low, high = (0, 2**31 - 1) if is_time else (-(2**31), 2**31 - 1)
        if not low <= sec <= high:
            raise ctx.value_error(path, f"seconds in [{low}, {high}] for {describe_type(slot_type)}", value)
        return cls(sec=sec, nanosec=nanosec)
    if _is_builtin_interface(slot_type, "std_msgs", "Header") and isinstance(value, str) and value == "auto":
        header = cls()
        sec, nanosec = divmod(ctx.now_ns(), _NS_PER_S)
        header.stamp.sec, header.stamp.nanosec = sec, nanosec
        return header
    target = current if current is not None else cls()
    _fill(target, value, path, ctx)
    return target


def _convert_string(value: Any, slot_type: Any, path: str, ctx: _FillContext) -> str:
    if isinstance(value, bool) or not isinstance(value, str | numbers.Real):
        hint = " (quote it in YAML: 'true')" if isinstance(value, bool) else ""
        raise ctx.value_error(path, f"a string{hint}", value)
    text = value if isinstance(value, str) else str(value)
    maximum = getattr(slot_type, "maximum_size", None)
    if maximum is not None and len(text) > maximum:
        raise ctx.value_error(path, f"a string of at most {maximum} characters", value)
    return text


def _convert_basic(value: Any, typename: str, path: str, ctx: _FillContext) -> Any:
    if typename == "boolean":
        if isinstance(value, bool | np.bool_) or (isinstance(value, numbers.Integral) and value in (0, 1)):
            return bool(value)
        raise ctx.value_error(path, "a boolean (true/false)", value)
    if typename in _FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ctx.value_error(path, f"a number ({typename})", value)
        number = float(value)
        if typename == "float" and math.isfinite(number) and abs(number) > _FLOAT32_MAX:
            raise ctx.value_error(path, "a number within float32 range", value)
        return number
    if typename == "octet":
        if isinstance(value, bytes | bytearray) and len(value) == 1:
            return bytes(value)
        return bytes([_checked_int(value, "uint8", (0, 255), path, ctx)])
    if typename in ("char", "wchar"):
        if isinstance(value, str) and len(value) == 1:
            return value
        return chr(_checked_int(value, "uint8", (0, 255), path, ctx))
    bounds = _INT_RANGES.get(typename)
    if bounds is None:
        raise ctx.value_error(path, f"a value of a supported type (not {typename})", value)
    return _checked_int(value, typename, bounds, path, ctx)


def _checked_int(value: Any, typename: str, bounds: tuple[int, int], path: str, ctx: _FillContext) -> int:
    low, high = bounds
    expected = f"an integer in [{low}, {high}] ({typename})"
    if isinstance(value, bool | np.bool_):
        raise ctx.value_error(path, expected, value)
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        number = int(float(value))
    else:
        raise ctx.value_error(path, expected, value)
    if not low <= number <= high:
        raise ctx.value_error(path, expected, value)
    return number


def _convert_array(value: Any, slot_type: Any, current: Any, path: str, ctx: _FillContext) -> Any:
    element_type = slot_type.value_type
    if isinstance(value, str | Mapping) or not isinstance(
        value, Sequence | np.ndarray | array.array | bytes | bytearray
    ):
        raise ctx.value_error(path, f"a list ({describe_type(slot_type)})", value)
    size = value.size if isinstance(value, np.ndarray) else len(value)
    if isinstance(slot_type, idl.Array) and size != slot_type.size:
        raise ctx.value_error(path, f"exactly {slot_type.size} elements ({describe_type(slot_type)})", value)
    if isinstance(slot_type, idl.BoundedSequence) and size > slot_type.maximum_size:
        raise ctx.value_error(path, f"at most {slot_type.maximum_size} elements ({describe_type(slot_type)})", value)

    if isinstance(element_type, idl.BasicType) and isinstance(value, np.ndarray):
        return _convert_numpy_array(value.reshape(-1), element_type.typename, current, path, ctx)
    if isinstance(element_type, idl.BasicType) and isinstance(value, bytes | bytearray):
        if element_type.typename in ("uint8", "octet", "char"):
            if isinstance(current, array.array):
                return array.array(current.typecode, value)
            if isinstance(current, np.ndarray):
                return np.frombuffer(bytes(value), dtype=np.uint8).astype(current.dtype)
            if element_type.typename == "octet":
                return bytes(value)
            return [chr(b) for b in value] if element_type.typename == "char" else list(value)
        raise ctx.value_error(path, f"a list of numbers ({describe_type(slot_type)}), not bytes", value)

    if isinstance(element_type, idl.NamespacedType):
        cls = _class_of(element_type)
        return [_convert(v, element_type, cls(), ctx.path(path, i), ctx) for i, v in enumerate(value)]
    items = [_convert(v, element_type, None, ctx.path(path, i), ctx) for i, v in enumerate(value)]
    if isinstance(current, array.array):
        return array.array(current.typecode, items)
    if isinstance(current, np.ndarray):
        return np.array(items, dtype=current.dtype)
    return items


def _convert_numpy_array(value: np.ndarray, typename: str, current: Any, path: str, ctx: _FillContext) -> Any:
    kind = value.dtype.kind
    if typename in _FLOAT_TYPES:
        if kind not in "biuf":
            raise ctx.value_error(path, f"a numeric array ({typename})", value)
    elif typename in _INT_RANGES or typename in ("octet", "char"):
        low, high = _INT_RANGES.get(typename, (0, 255))
        if kind not in "iu":
            raise ctx.value_error(path, f"an integer array ({typename})", value)
        if value.size and (int(value.min()) < low or int(value.max()) > high):
            raise ctx.value_error(path, f"integers in [{low}, {high}] ({typename})", value)
    elif typename == "boolean" and kind != "b":
        raise ctx.value_error(path, "a boolean array", value)
    if isinstance(current, array.array):
        converted = array.array(current.typecode)
        converted.frombytes(np.ascontiguousarray(value, dtype=np.dtype(current.typecode)).tobytes())
        return converted
    if isinstance(current, np.ndarray):
        return value.astype(current.dtype)
    return [_convert_basic(v, typename, ctx.path(path, i), ctx) for i, v in enumerate(value.tolist())]


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"a mapping with keys {', '.join(map(str, list(value)[:8]))}"
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, list | tuple | array.array):
        return f"a list of {len(value)} elements"
    if isinstance(value, bytes | bytearray):
        return f"{len(value)} bytes"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + TRUNCATION_MARKER
    return f"{type(value).__name__} {text}"
