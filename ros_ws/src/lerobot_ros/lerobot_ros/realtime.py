"""Real-time scheduling of a node's control thread: SCHED_FIFO, CPU affinity, locked memory (pure, no rclpy).

What ros2_control's realtime_tools gives the controller manager (`configure_sched_fifo`, `set_thread_affinity`,
`lock_memory`), for the threads that keep a robot's rate here: the action executor's tick loop, the arm driver's
control loop, the sim bridge's simulation loop. Each node declares the same parameters (`RealtimeParameters`)
and its loop calls `RealtimeThreads.apply` as its first statement, on itself. Like ros2_control's controller
manager, a loop asks for SCHED_FIFO by default (a busy host otherwise delays its ticks by several milliseconds)
and runs on with normal scheduling, after one warning, where the system refuses it:

* ``realtime_cpus``: the thread's CPU affinity (`os.sched_setaffinity` on its native id);
* ``realtime_lock_memory`` (off by default: it keeps every page of the process, thread stacks included, in
  RAM): ``mlockall(MCL_CURRENT | MCL_FUTURE)`` for the whole process, so that the loop never waits for a page to
  come back from swap;
* ``realtime_priority``: SCHED_FIFO at that priority (`os.sched_setscheduler` on its native id). The loops
  sleep between cycles; a moderate priority (50, below the kernel's interrupt threads) is the default.

A step the system refuses (no root, CAP_SYS_NICE / CAP_IPC_LOCK, rtprio or memlock limits; a CPU that does not
exist) is skipped: the thread runs on with what was applied, the node logs one warning naming what was refused
and why, and its /diagnostics say what was applied (`RealtimeReport.diagnostic_values`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lerobot_ros.node_kit.parameters import param

MCL_CURRENT = 1
MCL_FUTURE = 2
SCHED_FIFO: int = getattr(os, "SCHED_FIFO", 1)
sched_param: Callable[[int], Any] = getattr(os, "sched_param", lambda priority: priority)


@dataclass(frozen=True)
class RealtimeParameters:
    """The `realtime` parameters every node with a control loop declares (table: the lerobot_ros README)."""

    realtime: bool = param(
        True,
        "run the control thread SCHED_FIFO (realtime_priority), pinned (realtime_cpus), memory locked "
        "(realtime_lock_memory), as ros2_control's controller manager does; what the system refuses is skipped "
        "with one warning; false: normal scheduling",
    )
    realtime_priority: int = param(50, "SCHED_FIFO priority of the control thread with realtime on", low=1, high=99)
    realtime_cpus: tuple[int, ...] | None = param(
        None, "CPUs the control thread may run on with realtime on; unset = all the process may use"
    )
    realtime_lock_memory: bool = param(False, "with realtime on, lock the process's memory (mlockall)")


@dataclass(frozen=True)
class RealtimeReport:
    """What `apply_realtime` applied to one thread, and what the system refused (with why)."""

    thread: str
    requested: bool
    native_id: int = 0
    fifo_priority: int = 0  # 0: normal scheduling
    cpus: tuple[int, ...] = ()  # (): not pinned
    memory_locked: bool = False
    refused: tuple[str, ...] = ()

    @property
    def policy(self) -> str:
        return f"SCHED_FIFO {self.fifo_priority}" if self.fifo_priority else "SCHED_OTHER"

    def summary(self) -> str:
        """One line: the thread and what it runs with."""
        if not self.requested:
            return f"{self.thread}: normal scheduling (realtime off)"
        parts = [self.policy]
        if self.cpus:
            parts.append(f"cpus {list(self.cpus)}")
        if self.memory_locked:
            parts.append("memory locked")
        text = f"{self.thread}: {', '.join(parts)}"
        return f"{text}; refused: {'; '.join(self.refused)}" if self.refused else text

    def diagnostic_values(self) -> dict[str, str]:
        """Key/values for the node's /diagnostics status."""
        return {
            "realtime": str(self.requested).lower(),
            "realtime_thread": self.thread,
            "realtime_policy": self.policy,
            "realtime_cpus": ",".join(map(str, self.cpus)) if self.cpus else "all",
            "realtime_memory_locked": str(self.memory_locked).lower(),
            "realtime_refused": "; ".join(self.refused),
        }


def _mlockall() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _unsupported(name: str) -> Callable[..., Any]:
    def call(*args: object) -> Any:
        raise OSError(errno.ENOSYS, f"os.{name} is not available on this platform")

    return call


_SET_SCHEDULER: Callable[[int, int, Any], None] = getattr(os, "sched_setscheduler", _unsupported("sched_setscheduler"))
_SET_AFFINITY: Callable[[int, set[int]], None] = getattr(os, "sched_setaffinity", _unsupported("sched_setaffinity"))
_GET_AFFINITY: Callable[[int], set[int]] = getattr(os, "sched_getaffinity", _unsupported("sched_getaffinity"))


@dataclass(frozen=True)
class SystemCalls:
    """The calls `apply_realtime` makes (tests swap them for ones that refuse). Where the platform lacks one
    (os.sched_* are Linux's), it refuses with ENOSYS: the thread runs on, the refusal is reported."""

    set_scheduler: Callable[[int, int, Any], None] = field(default=_SET_SCHEDULER)
    set_affinity: Callable[[int, set[int]], None] = field(default=_SET_AFFINITY)
    get_affinity: Callable[[int], set[int]] = field(default=_GET_AFFINITY)
    lock_memory: Callable[[], None] = field(default=_mlockall)


# errno values that mean "not allowed": the refusal then says how to allow it.
_NOT_PERMITTED = {errno.EPERM, errno.EACCES, errno.ENOMEM, errno.EAGAIN}


def _why(err: OSError, hint: str = "") -> str:
    text = err.strerror or (os.strerror(err.errno) if err.errno is not None else str(err))
    return f"{text} ({hint})" if hint and err.errno in _NOT_PERMITTED else text


def apply_realtime(
    settings: RealtimeParameters, thread: str, *, fifo_refusal: str = "", calls: SystemCalls | None = None
) -> RealtimeReport:
    """Apply `settings` to the calling thread (call it first thing in the thread); never raises for a refusal.

    `fifo_refusal`, when not empty, is why this thread must not run SCHED_FIFO (e.g. a loop that does not sleep
    between steps would starve the machine): affinity and memory locking are still applied.
    """
    tid = threading.get_native_id()
    if not settings.realtime:
        return RealtimeReport(thread, False, tid)
    calls = calls or SystemCalls()
    refused: list[str] = []
    cpus: tuple[int, ...] = ()
    if settings.realtime_cpus:
        wanted = set(settings.realtime_cpus)
        try:
            allowed = calls.get_affinity(tid)
            missing = sorted(wanted - allowed)
            if missing:
                raise OSError(errno.EINVAL, f"CPUs {missing} are not among the process's {sorted(allowed)}")
            calls.set_affinity(tid, wanted)
            cpus = tuple(sorted(wanted))
        except OSError as err:
            refused.append(f"cpus {sorted(wanted)}: {_why(err)}")
    locked = False
    if settings.realtime_lock_memory:
        try:
            calls.lock_memory()
            locked = True
        except OSError as err:
            hint = "needs CAP_IPC_LOCK or a memlock limit (ulimit -l) above the process's size"
            refused.append(f"mlockall: {_why(err, hint)}")
    priority = 0
    if fifo_refusal:
        refused.append(f"SCHED_FIFO: {fifo_refusal}")
    else:
        try:
            calls.set_scheduler(tid, SCHED_FIFO, sched_param(settings.realtime_priority))
            priority = settings.realtime_priority
        except OSError as err:
            hint = f"needs root, CAP_SYS_NICE or an rtprio limit (ulimit -r) >= {settings.realtime_priority}"
            refused.append(f"SCHED_FIFO {settings.realtime_priority}: {_why(err, hint)}")
    return RealtimeReport(thread, True, tid, priority, cpus, locked, tuple(refused))


class RealtimeThreads:
    """What a node's `realtime` parameters applied to its control threads; one warning per refusal.

    `settings` is read at each `apply` (a node's current parameters); `warn` and `inform` are its logger's.
    A loop restarted (deactivate, activate) applies again, and warns again only if something new is refused.
    """

    def __init__(
        self,
        settings: Callable[[], RealtimeParameters],
        warn: Callable[[str], object],
        inform: Callable[[str], object],
        calls: SystemCalls | None = None,
    ) -> None:
        self._settings = settings
        self._warn = warn
        self._inform = inform
        self._calls = calls
        self._lock = threading.Lock()
        self._reports: dict[str, RealtimeReport] = {}
        self._warned: set[str] = set()

    def apply(self, thread: str, *, fifo_refusal: str = "") -> RealtimeReport:
        """`apply_realtime` to the calling thread, named `thread`; logs what it applied or refused."""
        report = apply_realtime(self._settings(), thread, fifo_refusal=fifo_refusal, calls=self._calls)
        with self._lock:
            self._reports[thread] = report
            new = [reason for reason in report.refused if reason not in self._warned]
            self._warned.update(new)
        if new:
            self._warn(f"real-time settings refused, running on without them: {report.summary()}")
        elif report.requested and not report.refused:
            self._inform(f"real-time: {report.summary()}")
        return report

    def reports(self) -> list[RealtimeReport]:
        with self._lock:
            return list(self._reports.values())

    def diagnostic_values(self) -> dict[str, str]:
        """The node's threads' `RealtimeReport.diagnostic_values` (prefixed by thread when there are several)."""
        reports = self.reports()
        if not reports:
            return {"realtime": str(self._settings().realtime).lower(), "realtime_policy": "not started"}
        if len(reports) == 1:
            return reports[0].diagnostic_values()
        values: dict[str, str] = {}
        for report in reports:
            prefix = report.thread.replace(" ", "_")
            values.update({f"{prefix}.{key}": value for key, value in report.diagnostic_values().items()})
        return values
