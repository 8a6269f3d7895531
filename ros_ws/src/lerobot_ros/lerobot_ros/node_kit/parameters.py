"""A node's parameters as one frozen dataclass: the declarative table generate_parameter_library gives C++ nodes.

Each field is one parameter; `param()` gives its default, description, range or choices and read-only flag, and
the field's annotation its type::

    @dataclass(frozen=True)
    class CameraParameters:
        device: str = param("", "index (0), path (/dev/video0) or synthetic")
        jpeg_quality: int = param(90, "JPEG quality", low=1, high=100, step=1, read_only=False)
        joint_limits_lower: tuple[float, ...] | None = param(None, "per-joint lower limits (rad)")

`ParameterTable.of(CameraParameters)` reads that table back; it checks a value (type, range, choices) with one
line naming the parameter, the value and what is allowed, builds the frozen config from the values a node holds,
applies runtime changes through the same checks, and renders the table as Markdown for the README. A default of
None declares a parameter without a value (rclpy's "uninitialized"; the config holds None until it is set).
The ROS side (declaring, the set-parameters callbacks) is `lerobot_ros.node_kit.ros`; this module imports no rclpy.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = [
    "Kind",
    "ParameterError",
    "ParameterSpec",
    "ParameterTable",
    "Value",
    "param",
]

Scalar = bool | int | float | str
Value = Scalar | tuple[bool, ...] | tuple[int, ...] | tuple[float, ...] | tuple[str, ...]
ConfigT = TypeVar("ConfigT")

_META_KEY = "lerobot_ros.parameter"


class ParameterError(ValueError):
    """A parameter value that its table does not allow; the message is one line saying which, and what is."""


class Kind(enum.Enum):
    """A parameter's type, with the names `ros2 param describe` prints."""

    BOOL = "bool"
    INTEGER = "integer"
    DOUBLE = "double"
    STRING = "string"
    BOOL_ARRAY = "bool_array"
    INTEGER_ARRAY = "integer_array"
    DOUBLE_ARRAY = "double_array"
    STRING_ARRAY = "string_array"

    @property
    def is_array(self) -> bool:
        return self.value.endswith("_array")

    @property
    def element(self) -> Kind:
        """The kind of one element (itself for a scalar kind)."""
        return Kind(self.value.removesuffix("_array")) if self.is_array else self


_SCALAR_KINDS: dict[Any, Kind] = {bool: Kind.BOOL, int: Kind.INTEGER, float: Kind.DOUBLE, str: Kind.STRING}
_NAMES = {
    Kind.BOOL: "a bool",
    Kind.INTEGER: "an integer",
    Kind.DOUBLE: "a double",
    Kind.STRING: "a string",
}


@dataclass(frozen=True)
class _Meta:
    description: str
    low: float | None
    high: float | None
    step: float | None
    choices: tuple[str, ...]
    read_only: bool


def param(
    default: Value | None,
    description: str,
    *,
    low: float | None = None,
    high: float | None = None,
    step: float | None = None,
    choices: Sequence[str] = (),
    read_only: bool = True,
) -> Any:
    """A dataclass field that is a parameter: read-only unless said otherwise, range `low..high` (both or none)."""
    if (low is None) != (high is None):
        raise ValueError(f"parameter range needs both low and high, got low={low}, high={high}")
    meta = _Meta(description, low, high, step, tuple(choices), read_only)
    return dataclasses.field(default=default, metadata={_META_KEY: meta})


def _kind_of(hint: Any) -> tuple[Kind, bool]:
    """The parameter kind of a field annotation, and whether it allows None."""
    optional = False
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"a parameter field is one type or that type | None, not {hint}")
        hint, optional = args[0], True
        origin = typing.get_origin(hint)
    if hint in _SCALAR_KINDS:
        return _SCALAR_KINDS[hint], optional
    if origin is tuple:
        items = typing.get_args(hint)
        if len(items) == 2 and items[1] is Ellipsis and items[0] in _SCALAR_KINDS:
            return Kind(_SCALAR_KINDS[items[0]].value + "_array"), optional
    raise TypeError(f"a parameter field is bool, int, float, str or a tuple[<one of them>, ...], not {hint}")


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _number(value: float, kind: Kind) -> str:
    if kind.element is Kind.INTEGER:
        return str(int(value))
    text = f"{float(value):.6g}"  # 2 * pi reads 6.28319
    return text if any(c in text for c in ".en") else f"{text}.0"


@dataclass(frozen=True)
class ParameterSpec:
    """One row of a node's parameter table."""

    name: str
    kind: Kind
    default: Value | None
    description: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = True

    def allowed(self) -> str:
        """What a value of this parameter may be, in words: "a double in 1.0..1000.0"."""
        element = self.kind.element
        text = _NAMES[element]
        if self.kind.is_array:
            text = f"a list of {text.split(' ', 1)[1]}s"
        if self.low is not None and self.high is not None:
            text += f" in {_number(self.low, element)}..{_number(self.high, element)}"
            if self.step:
                text += f" (step {_number(self.step, element)})"
        if self.choices:
            text += f", one of {', '.join(self.choices)}"
        return text

    def reason(self, value: Any) -> str | None:
        """Why `value` is not allowed for this parameter (one line), or None when it is."""
        bad = f"parameter {self.name} = {_show(value)} is not allowed: expected {self.allowed()}"
        items: Iterable[Any]
        if self.kind.is_array:
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                return bad
            items = value
        else:
            items = (value,)
        for item in items:
            if not _is_kind(item, self.kind.element):
                if self.kind.element is Kind.DOUBLE and isinstance(item, int) and not isinstance(item, bool):
                    return f"{bad} (write {item}.0 for a double)"
                return bad
            if self.low is not None and self.high is not None and not self.low <= item <= self.high:
                return bad
            if self.choices and item not in self.choices:
                return bad
        return None

    def coerce(self, value: Any) -> Value | None:
        """`value` as the config holds it: arrays as tuples (rclpy gives lists and array.array)."""
        if value is None:
            return None
        if self.kind.is_array:
            return tuple(value)
        return typing.cast(Value, value)

    def markdown_row(self) -> str:
        """This parameter as a row of the README table."""
        if self.default is None:
            default = "(unset)"
        elif isinstance(self.default, str):
            default = f'`"{self.default}"`' if self.default == "" else f"`{self.default}`"
        elif isinstance(self.default, bool):
            default = f"`{str(self.default).lower()}`"
        else:
            default = f"`{_show(self.default)}`"
        limits = ""
        if self.low is not None and self.high is not None:
            limits = f"{_number(self.low, self.kind)}..{_number(self.high, self.kind)}"
        if self.choices:
            limits = ", ".join(f"`{c}`" for c in self.choices)
        description = self.description.replace("|", "\\|")
        read_only = "yes" if self.read_only else "no"
        return f"| `{self.name}` | {self.kind.value} | {default} | {limits} | {read_only} | {description} |"


def _is_kind(value: Any, kind: Kind) -> bool:
    if kind is Kind.BOOL:
        return isinstance(value, bool)
    if kind is Kind.INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is Kind.DOUBLE:
        return isinstance(value, float) and not math.isnan(value)
    return isinstance(value, str)


MARKDOWN_HEADER = (
    "| parameter | type | default | range / choices | read-only | description |\n|---|---|---|---|---|---|"
)


class ParameterTable(Generic[ConfigT]):
    """The parameters of one node, read from its config dataclass (see the module docstring)."""

    def __init__(self, config_type: type[ConfigT], specs: Sequence[ParameterSpec]) -> None:
        self.config_type = config_type
        self.specs = tuple(specs)
        self._by_name = {spec.name: spec for spec in self.specs}

    @classmethod
    def of(cls, config_type: type[ConfigT]) -> ParameterTable[ConfigT]:
        """The table of a frozen dataclass whose fields are all made with `param()`."""
        if not dataclasses.is_dataclass(config_type):
            raise TypeError(f"{config_type.__name__} is not a dataclass")
        hints = typing.get_type_hints(config_type)
        specs = []
        for f in dataclasses.fields(config_type):
            meta = f.metadata.get(_META_KEY)
            if not isinstance(meta, _Meta):
                raise TypeError(f"{config_type.__name__}.{f.name} is not a parameter: make it with param()")
            kind, optional = _kind_of(hints[f.name])
            default = typing.cast(Value | None, f.default)
            if default is None and not optional:
                raise TypeError(f"{config_type.__name__}.{f.name} defaults to None: annotate it `... | None`")
            spec = ParameterSpec(
                f.name, kind, default, meta.description, meta.low, meta.high, meta.step, meta.choices, meta.read_only
            )
            if default is not None and (why := spec.reason(default)) is not None:
                raise TypeError(f"{config_type.__name__}: the default of {why}")
            specs.append(spec)
        return cls(config_type, specs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def spec(self, name: str) -> ParameterSpec:
        try:
            return self._by_name[name]
        except KeyError:
            raise ParameterError(f"no parameter {name}; this node has {', '.join(self.names)}") from None

    def only(self, names: Iterable[str]) -> ParameterTable[dict[str, Any]]:
        """A table of some of these parameters whose config is a plain dict (a group of per-item settings)."""
        return ParameterTable(dict, [self.spec(name) for name in names])

    def check(self, name: str, value: Any) -> Value | None:
        """`value` as the config holds it; ParameterError with one line if the table does not allow it."""
        spec = self.spec(name)
        if value is None and spec.default is None:
            return None
        if (why := spec.reason(value)) is not None:
            raise ParameterError(why)
        return spec.coerce(value)

    def build(self, values: Mapping[str, Any]) -> ConfigT:
        """The config from every parameter's value (names missing from `values` take their default)."""
        kwargs = {spec.name: self.check(spec.name, values.get(spec.name, spec.default)) for spec in self.specs}
        return self._make(kwargs)

    def change(self, config: ConfigT, changes: Mapping[str, Any]) -> ConfigT:
        """`config` with `changes` applied, each checked like at start-up; read-only ones are refused."""
        kwargs = self.values(config)
        for name, value in changes.items():
            spec = self.spec(name)
            if spec.read_only:
                raise ParameterError(f"parameter {name} is read-only: set it at start-up (it is {_show(kwargs[name])})")
            kwargs[name] = self.check(name, value)
        return self._make(kwargs)

    def values(self, config: ConfigT) -> dict[str, Any]:
        """Name -> value of every parameter of `config`."""
        if isinstance(config, dict):
            return dict(config)
        return {spec.name: getattr(config, spec.name) for spec in self.specs}

    def _make(self, kwargs: dict[str, Any]) -> ConfigT:
        try:
            return self.config_type(**kwargs)
        except ParameterError:
            raise
        except ValueError as err:  # the config's own __post_init__: a rule across parameters
            raise ParameterError(str(err)) from None

    def markdown(self) -> str:
        """The table as Markdown (the README sections are checked against this)."""
        return "\n".join([MARKDOWN_HEADER, *(spec.markdown_row() for spec in self.specs)])
