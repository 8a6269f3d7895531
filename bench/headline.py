"""Headline figures: the few numbers of a benchmark that a person compares run to run.

Each benchmark's JSON has a top-level `"headline"` list of records made by `figure()`:

    {"figure": "sustained frames/s, libsvtav1", "value": 47.7, "unit": "frames/s",
     "baseline": 9.8, "baseline_what": "PNG files then batch encode (LeRobot's non-streaming path), same run",
     "target": ">= 30 (real time)", "met": true}

`baseline` is measured in the same run (or null when the benchmark has none); `target` comes from the
issue or README that set it (or null). A target is `<op> <number>[x baseline] [words]` or
`<op> baseline [words]`, with `<op>` one of `>=`, `<=`, `>`, `<`, `==` (or `≥`, `≤`; `×` for `x`); the words
after it are for the reader. `met` is computed from value, baseline and target: null when there is no target
or a number it needs is missing.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
}
_TARGET = re.compile(
    r"^\s*(?P<op>>=|<=|==|>|<)\s*"
    r"(?:(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<times>x\s+baseline\b)?|(?P<baseline>baseline\b))"
)


class TargetError(ValueError):
    """A target string that does not follow `<op> <number>[x baseline] [words]`."""


def number(value: Any) -> float | None:
    """`value` as a finite float, or None (missing, NaN, inf, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def target_met(value: Any, baseline: Any, target: str | None) -> bool | None:
    """Whether `value` meets `target` (which may refer to `baseline`); None when that cannot be decided."""
    if target is None:
        return None
    match = _TARGET.match(target.replace("≥", ">=").replace("≤", "<=").replace("×", "x"))
    if match is None:
        raise TargetError(f"target {target!r} is not '<op> <number>[x baseline] [words]' or '<op> baseline [words]'")
    measured = number(value)
    if measured is None:
        return None
    if match["number"] is not None and match["times"] is None:
        threshold = float(match["number"])
    else:
        reference = number(baseline)
        if reference is None:
            return None
        threshold = reference * (float(match["number"]) if match["number"] is not None else 1.0)
    return _OPERATORS[match["op"]](measured, threshold)


def ratio(value: Any, baseline: Any) -> float | None:
    """value / baseline, or None when either is missing or the baseline is 0."""
    measured, reference = number(value), number(baseline)
    if measured is None or reference is None or reference == 0:
        return None
    return measured / reference


def figure(
    name: str,
    value: float | None,
    unit: str,
    *,
    baseline: float | None = None,
    baseline_what: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """One headline record; `met` is evaluated here. NaN/inf values are stored as null (not measured)."""
    if number(baseline) is not None and not baseline_what:
        raise ValueError(f"figure {name!r}: a baseline needs baseline_what (what was measured as the baseline)")
    return {
        "figure": name,
        "value": number(value),
        "unit": unit,
        "baseline": number(baseline),
        "baseline_what": baseline_what,
        "target": target,
        "met": target_met(value, baseline, target),
    }
