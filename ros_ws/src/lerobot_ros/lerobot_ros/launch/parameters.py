"""Typing of node parameters and typed attributes, exactly as launch / launch_ros's YAML frontend does it.

launch_ros reads an inline `param` in three steps, and so does this module:

1. the raw YAML value must fit the declared `type` (`value: 5, type: float` is an error, a quoted
   string always passes this step);
2. a string without `$(...)` stays a literal string (`value: "5"` is the string "5"); with
   `$(...)`, it is substituted and then converted: by YAML rules without a `type`
   (`"$(var rate)"` with rate 7.5 -> 7.5), or to the `type`;
3. a literal whose type differs from the declared `type` is an error (`value: "true", type: bool`).

Types: `str`, `int`, `float`, `bool`, `list_of_str`, `list_of_int`, `list_of_float`,
`list_of_bool`, `yaml` (the same as no type).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml

from lerobot_ros.bounded_yaml import load_yaml
from lerobot_ros.launch.substitutions import Template, has_substitutions, parse_template

ParameterResult = bool | int | float | str | list[Any]
SCALAR_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}
TYPE_NAMES = (*SCALAR_TYPES, *(f"list_of_{t}" for t in SCALAR_TYPES), "yaml")
_TYPE_HINTS = {f"list[{t}]": f"list_of_{t}" for t in SCALAR_TYPES}


class ParameterTypeError(ValueError):
    """A parameter value does not fit its type (launch_ros raises TypeError/ValueError there)."""


def flatten_parameters(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested parameter mappings as ROS names them: `{"a": {"b": 1}}` -> `{"a.b": 1}`."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(flatten_parameters(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def parse_type(name: Any) -> tuple[type | None, bool]:
    """`type:` -> (scalar type or None for YAML rules, is a list)."""
    if name == "yaml":
        return None, False
    if isinstance(name, str) and name in SCALAR_TYPES:
        return SCALAR_TYPES[name], False
    if isinstance(name, str) and name.startswith("list_of_") and name[8:] in SCALAR_TYPES:
        return SCALAR_TYPES[name[8:]], True
    hint = f"; launch_ros spells it {_TYPE_HINTS[name]}" if name in _TYPE_HINTS else ""
    raise ParameterTypeError(f"unknown param type {name!r} (use one of {', '.join(TYPE_NAMES)}){hint}")


def _scalar_ok(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str))


def _uniform(values: list[Any], can_be_str: bool) -> bool:
    """launch's `is_instance_of_valid_type` for a list."""
    if not values:
        return True
    member = next((type(v) for v in values if type(v) is not str), str)
    if member not in (bool, int, float, str):
        return False
    allowed: tuple[type, ...] = (member, str) if can_be_str else (member,)
    return all(isinstance(v, allowed) for v in values)


def _type_label(scalar: type | None, is_list: bool) -> str:
    if scalar is None:
        return "yaml"
    return f"list_of_{scalar.__name__}" if is_list else scalar.__name__


def check_raw_value(raw: Any, scalar: type | None, is_list: bool) -> None:
    """Step 1 (launch_yaml's `get_attr(..., data_type)` with strings allowed)."""
    label = _type_label(scalar, is_list)
    if scalar is None and not is_list:
        if isinstance(raw, list):
            if not _uniform(raw, can_be_str=True):
                raise ParameterTypeError(f"a list value must hold one type of scalar, got {raw!r}")
        elif not _scalar_ok(raw):
            raise ParameterTypeError(f"a value must be a scalar or a list of scalars, got {raw!r}")
        return
    assert scalar is not None
    allowed = (str, scalar)
    if is_list:
        if not isinstance(raw, list) or not all(isinstance(v, allowed) for v in raw):
            raise ParameterTypeError(
                f"{raw!r} is not a list of {scalar.__name__} (type {label}); write e.g. [1.0, 2.0] for list_of_float"
            )
        return
    if not isinstance(raw, allowed):
        how = " (write 5.0, not 5, for a float)" if scalar is float and isinstance(raw, int) else ""
        raise ParameterTypeError(f"{raw!r} is not a {scalar.__name__}{how}")


def coerce_text(text: str, scalar: type | None, is_list: bool) -> ParameterResult:
    """launch's `coerce_to_type` (substituted text -> typed value)."""

    def as_yaml() -> Any:
        if not text:
            return text
        try:
            value = load_yaml(text)
        except yaml.YAMLError:
            raise ParameterTypeError(f"{text!r} is not valid YAML") from None
        if not (_scalar_ok(value) or (isinstance(value, list) and _uniform(value, can_be_str=False))):
            raise ParameterTypeError(f"{text!r} is not a scalar or a list of one type of scalar")
        return value

    if scalar is None:
        return as_yaml()  # type: ignore[no-any-return]
    if is_list:
        value = as_yaml()
        if not isinstance(value, list) or not all(isinstance(v, scalar) for v in value):
            raise ParameterTypeError(f"{text!r} is not a list of {scalar.__name__}")
        return value
    if scalar is str:
        return text
    if scalar in (int, float):
        try:
            return scalar(text)
        except ValueError:
            raise ParameterTypeError(f"{text!r} is not a {scalar.__name__}") from None
    text = {"1": "true", "0": "false"}.get(text, text)
    value = as_yaml()
    if not isinstance(value, bool):
        raise ParameterTypeError(f"{text!r} is not a bool")
    return value


def parameter_value(raw: Any, type_name: Any | None, evaluate: Callable[[Template], str]) -> ParameterResult:
    """The value of an inline `param` (all three steps); raises `ParameterTypeError` as launch_ros would fail."""
    scalar, is_list = (None, False) if type_name is None else parse_type(type_name)
    check_raw_value(raw, scalar, is_list)
    # Step 2: literal strings stay literal (launch's parse_if_substitutions), templates are kept.
    literal_types: set[type] = set()

    def parsed(item: Any) -> Any:
        if isinstance(item, str):
            template = parse_template(item)
            if not has_substitutions(template):
                literal_types.add(str)
                return "".join(part for part in template if isinstance(part, str))
            return template
        literal_types.add(type(item))
        return item

    value = [parsed(v) for v in raw] if isinstance(raw, list) else parsed(raw)
    if len(literal_types) > 1:
        raise ParameterTypeError(f"{raw!r} is a list of mixed types")
    # Step 3: launch's normalize_typed_substitution + perform_typed_substitution.
    if not isinstance(value, list):
        if isinstance(value, tuple):
            return coerce_text(evaluate(value), scalar, is_list)
        if scalar is not None and not isinstance(value, scalar):
            raise ParameterTypeError(
                f"value {value!r} is not a {scalar.__name__}: a quoted literal stays a string in launch_ros; "
                f"write it unquoted ({str(value).lower() if scalar is bool else value}) or drop 'type'"
            )
        if scalar is None and is_list:  # pragma: no cover - a list type with a scalar is refused in step 1
            raise ParameterTypeError(f"{value!r} is not a list")
        return value  # type: ignore[no-any-return]
    kinds = {tuple if isinstance(v, tuple) else type(v) for v in value}
    plain = kinds - {tuple}
    if plain and not (
        (plain <= {str} and scalar in (None, str))
        or (plain <= {bool} and scalar in (None, bool))
        or (plain <= {int} and scalar in (None, int))
        or (plain <= {int, float} and scalar in (None, float))
    ):
        raise ParameterTypeError(f"{raw!r} is not a list of {_type_label(scalar, True)[8:] or 'one type'}")
    promote_float = float in plain
    items = [
        coerce_text(evaluate(v), scalar, False) if isinstance(v, tuple) else (float(v) if promote_float else v)
        for v in value
    ]
    if scalar is None:
        if not _uniform(items, can_be_str=False):
            raise ParameterTypeError(f"the list {items!r} does not hold one type after substitution")
    elif not all(isinstance(v, scalar) for v in items):
        raise ParameterTypeError(f"the list {items!r} is not a list of {scalar.__name__}")
    return items


def global_parameter_value(text: str) -> ParameterResult:
    """A `set_parameter` value: its substituted text read as YAML (launch_ros's evaluate_parameter_dict)."""
    try:
        value = load_yaml(text or "''")
    except yaml.YAMLError:
        raise ParameterTypeError(f"{text!r} is not valid YAML") from None
    if _scalar_ok(value):
        return value  # type: ignore[no-any-return]
    if (
        isinstance(value, list)
        and value
        and _uniform(value, can_be_str=False)
        and type(value[0]) in SCALAR_TYPES.values()
    ):
        return value
    raise ParameterTypeError(f"{text!r} is not a scalar or a non-empty list of one type of scalar")


def global_parameter_rule(name: str, value: ParameterResult) -> str:
    """The `-p NAME:=VALUE` rule launch_ros writes for a `set_parameter` (Python's str of the value)."""
    return f"{name}:={tuple(value) if isinstance(value, list) else value}"
