"""Declare a node's parameter table on an rclpy node and keep its frozen config in step with runtime changes.

    self.params = declare_parameters(self, ArmDriverParameters, check=self._check_change)
    self.params.config.loop_rate        # typed, frozen; replaced (never mutated) when a change is accepted

Every parameter is declared once, with a descriptor that carries its description, range and read-only flag
(choices go into `additional_constraints` and the description). Values given at start-up are checked against
the table before rclpy sees them, so a bad one stops the node with one line (ParameterError) naming the node,
the parameter, the value and what is allowed. A runtime change (`ros2 param set`, `set_parameters`) goes
through the same table: read-only ones and values out of range are refused with a reason, then the node's own
`check(old, new, changed)` may refuse it too; an accepted change replaces `params.config` and calls `applied`.

A lifecycle node passes `defer_errors=True`: a start-up value that rclpy takes but the table refuses (a string
not among the choices) then fails configure instead of construction, as lifecycle managers expect; until
then the config holds that parameter's default, and `params.require()` (first thing in configure) raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from lerobot_ros.node_kit.parameters import Kind, ParameterError, ParameterSpec, ParameterTable

ConfigT = TypeVar("ConfigT")

Check = Callable[[ConfigT, ConfigT, frozenset[str]], "str | None"]
Applied = Callable[[ConfigT, frozenset[str]], None]

_ROS_TYPES = {
    Kind.BOOL: ParameterType.PARAMETER_BOOL,
    Kind.INTEGER: ParameterType.PARAMETER_INTEGER,
    Kind.DOUBLE: ParameterType.PARAMETER_DOUBLE,
    Kind.STRING: ParameterType.PARAMETER_STRING,
    Kind.BOOL_ARRAY: ParameterType.PARAMETER_BOOL_ARRAY,
    Kind.INTEGER_ARRAY: ParameterType.PARAMETER_INTEGER_ARRAY,
    Kind.DOUBLE_ARRAY: ParameterType.PARAMETER_DOUBLE_ARRAY,
    Kind.STRING_ARRAY: ParameterType.PARAMETER_STRING_ARRAY,
}
_UNSET_TYPES = {
    Kind.BOOL: Parameter.Type.BOOL,
    Kind.INTEGER: Parameter.Type.INTEGER,
    Kind.DOUBLE: Parameter.Type.DOUBLE,
    Kind.STRING: Parameter.Type.STRING,
    Kind.BOOL_ARRAY: Parameter.Type.BOOL_ARRAY,
    Kind.INTEGER_ARRAY: Parameter.Type.INTEGER_ARRAY,
    Kind.DOUBLE_ARRAY: Parameter.Type.DOUBLE_ARRAY,
    Kind.STRING_ARRAY: Parameter.Type.STRING_ARRAY,
}


def descriptor(spec: ParameterSpec, name: str | None = None) -> ParameterDescriptor:
    """The ROS descriptor of one table row (what `ros2 param describe` shows)."""
    text = spec.description
    extra: dict[str, Any] = {}
    if spec.low is not None and spec.high is not None:
        if spec.kind.element is Kind.INTEGER:
            step = int(spec.step or 0)
            extra["integer_range"] = [IntegerRange(from_value=int(spec.low), to_value=int(spec.high), step=step)]
        else:
            low, high, step_f = float(spec.low), float(spec.high), float(spec.step or 0.0)
            extra["floating_point_range"] = [FloatingPointRange(from_value=low, to_value=high, step=step_f)]
    if spec.choices:
        text = f"{text} (one of: {', '.join(spec.choices)})"
        extra["additional_constraints"] = f"one of {list(spec.choices)}"
    return ParameterDescriptor(
        name=name or spec.name,
        type=_ROS_TYPES[spec.kind],
        description=text,
        read_only=spec.read_only,
        **extra,
    )


class NodeParameters(Generic[ConfigT]):
    """A node's declared parameter table and its current frozen config (see the module docstring)."""

    def __init__(
        self,
        node: Node,
        table: ParameterTable[ConfigT],
        config: ConfigT,
        *,
        prefix: str = "",
        check: Check[ConfigT] | None = None,
        applied: Applied[ConfigT] | None = None,
        refused: Mapping[str, str] | None = None,
    ) -> None:
        self.table = table
        self._refused = dict(refused or {})
        self.prefix = prefix
        self._node = node
        self._config = config
        self._check = check
        self._applied = applied
        node.add_on_set_parameters_callback(self._on_set)
        node.add_post_set_parameters_callback(self._on_applied)

    @property
    def config(self) -> ConfigT:
        """The parameters as they are now (a new object after every accepted change)."""
        return self._config

    def require(self) -> ConfigT:
        """The config; ParameterError if a start-up value was refused (`defer_errors`) and is still set."""
        if self._refused:
            raise ParameterError("; ".join(self._refused.values()))
        return self._config

    def _changes(self, params: list[Parameter[Any]]) -> dict[str, Any]:
        changes = {}
        for p in params:
            if p.name.startswith(self.prefix) and p.name[len(self.prefix) :] in self.table:
                changes[p.name[len(self.prefix) :]] = p.value
        return changes

    def _on_set(self, params: list[Parameter[Any]]) -> SetParametersResult:
        changes = self._changes(params)
        if not changes:
            return SetParametersResult(successful=True)
        try:
            new = self.table.change(self._config, changes)
        except ParameterError as err:
            return SetParametersResult(successful=False, reason=str(err))
        if self._check is not None and (reason := self._check(self._config, new, frozenset(changes))) is not None:
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _on_applied(self, params: list[Parameter[Any]]) -> None:
        changes = self._changes(params)
        if not changes:
            return
        values = self.table.values(self._config)
        values.update({name: self.table.spec(name).coerce(value) for name, value in changes.items()})
        self._config = self.table.build(values)
        for name in changes:
            self._refused.pop(name, None)
        if self._applied is not None:
            self._applied(self._config, frozenset(changes))


def declare_parameters(
    node: Node,
    table: ParameterTable[ConfigT] | type[ConfigT],
    *,
    prefix: str = "",
    check: Check[ConfigT] | None = None,
    applied: Applied[ConfigT] | None = None,
    defer_errors: bool = False,
) -> NodeParameters[ConfigT]:
    """Declare every parameter of `table` (names prefixed by `prefix`) on `node`; their config, checked.

    Raises ParameterError (one line: node, parameter, value, what is allowed) for a value given at start-up
    that the table does not allow; with `defer_errors`, only where rclpy refuses it too (see the module doc).
    """
    if not isinstance(table, ParameterTable):
        table = ParameterTable.of(table)
    overrides: Mapping[str, Parameter[Any]] = getattr(node, "_parameter_overrides", {})
    where = node.get_fully_qualified_name()
    values: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for spec in table.specs:
        name = prefix + spec.name
        given = overrides.get(name)
        if given is not None and given.type_ != Parameter.Type.NOT_SET and (why := spec.reason(given.value)):
            problem = f"{where}: {why.replace(spec.name, name, 1)}"
            if not defer_errors or not _ros_accepts(spec, given.value):
                raise ParameterError(problem)
            refused[spec.name] = problem
        default = _UNSET_TYPES[spec.kind] if spec.default is None else _ros_value(spec)
        try:
            declared = node.declare_parameter(name, default, descriptor(spec, name))
        except Exception as err:  # rclpy's own checks, should the table's have let something through
            raise ParameterError(f"{where}: parameter {name}: {err}") from None
        value = None if declared.type_ == Parameter.Type.NOT_SET else declared.value
        values[spec.name] = spec.default if value is not None and spec.reason(value) else value
    try:
        config = table.build(values)
    except ParameterError as err:
        raise ParameterError(f"{where}: {err}") from None
    return NodeParameters(node, table, config, prefix=prefix, check=check, applied=applied, refused=refused)


def _ros_accepts(spec: ParameterSpec, value: Any) -> bool:
    """Whether rclpy's own checks (type, range) let `value` through: only choices are the table's alone."""
    without_choices = ParameterSpec(spec.name, spec.kind, None, "", spec.low, spec.high, spec.step)
    return without_choices.reason(value) is None


def _ros_value(spec: ParameterSpec) -> Any:
    return list(spec.default) if isinstance(spec.default, tuple) else spec.default
