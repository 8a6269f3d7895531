"""One configure transition for every lifecycle node: say why it failed, then fail it the same way.

rclpy turns an exception escaping `on_configure` into the ERROR transition without a word; nodes used to
catch some errors (log, FAILURE) and let others through (silent ERROR). `configure_transition` runs the node's
configure work: an error of an `expected` type (and ParameterError) is logged as one line
``configure failed: <reason>``, anything else with its traceback; both call `on_failure(reason)` (release
what was half made, put the reason on /diagnostics) and return FAILURE, so the node stays unconfigured and
can be configured again once the cause is fixed.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

from lerobot_ros.node_kit.parameters import ParameterError


def configure_transition(
    node: LifecycleNode,
    configure: Callable[[], None],
    *,
    expected: tuple[type[Exception], ...] = (),
    on_failure: Callable[[str], None] | None = None,
) -> TransitionCallbackReturn:
    """SUCCESS when `configure()` returns; otherwise log the reason, `on_failure(reason)`, FAILURE."""
    known: tuple[type[Exception], ...] = (ParameterError, *expected)
    try:
        configure()
    except known as err:
        reason = str(err)
        node.get_logger().error(f"configure failed: {reason}")
    except Exception as err:
        reason = f"{type(err).__name__}: {err}"
        node.get_logger().error(f"configure failed:\n{traceback.format_exc()}")
    else:
        return TransitionCallbackReturn.SUCCESS
    if on_failure is not None:
        on_failure(reason)
    return TransitionCallbackReturn.FAILURE
