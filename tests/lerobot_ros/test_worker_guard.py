"""WorkerGuard: no thread of a node dies silently (issue 18).

The core with plain callables (no ROS graph), then a lifecycle node in its own process: an exception injected
into its worker thread reaches ERROR on /diagnostics and the node leaves `active` through on_error.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from lerobot_ros.worker_guard import WorkerFailure, WorkerGuard


class Sink:
    def __init__(self, shutting_down: bool = False) -> None:
        self.logged: list[str] = []
        self.reported: list[WorkerFailure] = []
        self.failed: list[WorkerFailure] = []
        self.shutting_down = shutting_down

    def guard(self) -> WorkerGuard:
        return WorkerGuard(
            log_error=self.logged.append,
            report=self.reported.append,
            on_failure=self.failed.append,
            shutting_down=lambda: self.shutting_down,
        )


def broken(value: int) -> int:
    raise ValueError(f"bad value {value}")


def test_a_normal_call_returns_its_value_and_reports_nothing():
    sink = Sink()
    guard = sink.guard()
    assert guard.call("loop", lambda x: x + 1, 1) == 2
    assert not guard.failed and not sink.logged and not sink.reported and not sink.failed


def test_an_exception_is_logged_with_its_traceback_reported_and_handed_on_once():
    sink = Sink()
    guard = sink.guard()
    assert guard.call("tick loop", broken, 3) is None
    assert len(sink.logged) == 1
    assert "tick loop failed: ValueError: bad value 3" in sink.logged[0]
    assert "Traceback (most recent call last)" in sink.logged[0] and "in broken" in sink.logged[0]
    assert [f.message for f in sink.reported] == ["tick loop failed: ValueError: bad value 3"]
    assert [f.worker for f in sink.failed] == ["tick loop"]
    # A timer callback failing again: counted and reported, but logged and handed on only once.
    guard.call("tick loop", broken, 4)
    assert len(sink.logged) == 1 and len(sink.failed) == 1
    assert sink.reported[-1].count == 2 and sink.reported[-1].message.startswith("tick loop failed (2 times)")
    assert guard.failed and [f.worker for f in guard.failures] == ["tick loop"]
    guard.clear()
    assert not guard.failed


def test_a_guarded_thread_records_its_failure_under_its_name():
    sink = Sink()
    guard = sink.guard()
    thread = guard.thread("encoder", broken, 7)
    thread.join(timeout=10)
    assert not thread.is_alive() and thread.name == "encoder"
    assert [f.worker for f in sink.failed] == ["encoder"] and "bad value 7" in sink.failed[0].error


def test_wrap_keeps_the_callback_usable_as_a_timer_callback():
    sink = Sink()
    guard = sink.guard()
    calls = []
    wrapped = guard.wrap("status", lambda: calls.append(1) or 1 / 0)
    wrapped()
    wrapped()
    assert len(calls) == 2 and sink.reported[-1].count == 2 and "ZeroDivisionError" in sink.reported[-1].error


def test_while_shutting_down_an_exception_is_only_logged():
    sink = Sink(shutting_down=True)
    guard = sink.guard()
    guard.call("loop", broken, 1)
    assert sink.logged == ["loop ended while shutting down: ValueError: bad value 1"]
    assert not sink.reported and not sink.failed


def test_annotate_turns_the_nodes_own_status_into_error():
    from diagnostic_msgs.msg import DiagnosticStatus

    sink = Sink()
    guard = sink.guard()
    ok = guard.annotate(DiagnosticStatus(level=DiagnosticStatus.OK, message="executing"))
    assert ok.level == DiagnosticStatus.OK and ok.message == "executing"
    guard.call("tick loop", broken, 2)
    status = guard.annotate(DiagnosticStatus(level=DiagnosticStatus.OK, message="executing"))
    assert status.level == DiagnosticStatus.ERROR and status.message == "tick loop failed: ValueError: bad value 2"


@pytest.mark.ros
def test_an_exception_in_a_worker_thread_reaches_diagnostics_and_the_error_transition(processes, ros_node):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from lifecycle_msgs.srv import GetState
    from std_msgs.msg import Empty, String

    from lerobot_ros.testing import call_service

    lock = threading.Lock()
    errors: list = []
    events: list[str] = []

    def on_diagnostics(msg) -> None:
        with lock:
            errors.extend(s for s in msg.status if s.level == DiagnosticStatus.ERROR)

    def on_event(msg) -> None:
        with lock:
            events.append(msg.data)

    ros_node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 50)
    ros_node.create_subscription(String, "/probe/guard_probe/events", on_event, 10)
    fail = ros_node.create_publisher(Empty, "/probe/guard_probe/fail", 10)
    probe = processes.start(
        [sys.executable, str(Path(__file__).with_name("guard_probe_node.py")), "--ros-args", "-r", "__ns:=/probe"],
        name="guard_probe",
    )
    probe.wait_for_output("active", timeout=60)
    state = call_service(ros_node, GetState, "/probe/guard_probe/get_state", GetState.Request())
    assert state.current_state.label == "active"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fail.publish(Empty())
        with lock:
            if errors and "on_error" in events:
                break
        time.sleep(0.1)
    with lock:
        assert errors, "no ERROR on /diagnostics"
        assert "on_error" in events, "the node's on_error never ran"
        error = errors[0]
    assert error.name == "/probe/guard_probe: work loop"
    assert error.message == "work loop failed: RuntimeError: injected fault in the work loop"
    state = call_service(ros_node, GetState, "/probe/guard_probe/get_state", GetState.Request())
    assert state.current_state.label == "unconfigured"
    output = probe.output()
    assert "Traceback (most recent call last)" in output and "injected fault in the work loop" in output
    assert probe.returncode is None  # the process stays up, ready to be configured again


def test_clear_upto_keeps_a_failure_recorded_after_the_ones_handled():
    """A worker failing while its node is being activated must survive the activation's clear."""
    sink = Sink()
    guard = sink.guard()
    guard.call("old", broken, 1)
    handled = guard.serial
    guard.call("new", broken, 2)
    guard.clear(upto=handled)
    assert [f.worker for f in guard.failures] == ["new"]
    guard.clear()
    assert not guard.failed
