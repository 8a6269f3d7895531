"""Real-time scheduling of control threads: applied where permitted, one warning and normal scheduling where not."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading

import pytest

from lerobot_ros.realtime import (
    SCHED_FIFO,
    RealtimeParameters,
    RealtimeReport,
    RealtimeThreads,
    SystemCalls,
    apply_realtime,
)

ON = RealtimeParameters(realtime=True, realtime_priority=10, realtime_lock_memory=False)


def in_thread(fn):
    """Run `fn` in a fresh thread (so that its scheduling dies with it); its result and the policy it ran with
    as /proc says (the `policy` line of /proc/self/task/<tid>/sched: 1 = SCHED_FIFO)."""
    out = {}

    def run() -> None:
        out["result"] = fn()
        tid = threading.get_native_id()
        out["scheduler"] = os.sched_getscheduler(tid)
        out["affinity"] = os.sched_getaffinity(tid)
        with open(f"/proc/self/task/{tid}/sched") as handle:
            out["proc_policy"] = next(int(line.split(":")[1]) for line in handle if line.startswith("policy"))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return out


def refusing(code: int = errno.EPERM) -> SystemCalls:
    def refuse(*args) -> None:
        raise OSError(code, os.strerror(code))

    return SystemCalls(set_scheduler=refuse, set_affinity=refuse, lock_memory=refuse)


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO and affinity need root here")
def test_sched_fifo_and_affinity_are_applied_to_the_calling_thread():
    cpu = min(os.sched_getaffinity(0))
    settings = RealtimeParameters(realtime=True, realtime_priority=10, realtime_cpus=(cpu,), realtime_lock_memory=False)
    out = in_thread(lambda: apply_realtime(settings, "tick loop"))
    report: RealtimeReport = out["result"]
    assert report.refused == () and report.fifo_priority == 10 and report.cpus == (cpu,)
    assert out["scheduler"] == os.SCHED_FIFO and out["proc_policy"] == os.SCHED_FIFO
    assert out["affinity"] == {cpu}
    assert os.sched_getscheduler(0) == os.SCHED_OTHER, "only the calling thread changes"
    assert report.diagnostic_values()["realtime_policy"] == "SCHED_FIFO 10"


@pytest.mark.skipif(os.geteuid() != 0, reason="mlockall of a whole process needs root (or a memlock limit) here")
def test_memory_is_locked_for_the_whole_process(tmp_path):
    """In a small child process: mlockall locks everything the process maps (VmLck in /proc/self/status)."""
    code = (
        "from lerobot_ros.realtime import RealtimeParameters, apply_realtime\n"
        "settings = RealtimeParameters(realtime=True, realtime_priority=5, realtime_lock_memory=True)\n"
        "r = apply_realtime(settings, 'loop')\n"
        "locked = [l for l in open('/proc/self/status') if l.startswith('VmLck')][0].split()[1]\n"
        "print(r.memory_locked, r.policy, int(locked) > 0, r.refused)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[:4] == ["True", "SCHED_FIFO", "5", "True"], out.stdout + out.stderr


def test_a_refusal_warns_once_and_the_thread_runs_on_with_normal_scheduling():
    warnings, infos = [], []
    settings = RealtimeParameters(realtime=True, realtime_priority=50, realtime_cpus=(0,), realtime_lock_memory=True)
    threads = RealtimeThreads(lambda: settings, warnings.append, infos.append, calls=refusing())
    first = in_thread(lambda: threads.apply("control loop"))
    again = in_thread(lambda: threads.apply("control loop"))  # the loop restarted (deactivate, activate)
    assert first["scheduler"] == again["scheduler"] == os.SCHED_OTHER
    report = again["result"]
    assert report.fifo_priority == 0 and report.cpus == () and not report.memory_locked
    assert len(warnings) == 1 and not infos, warnings
    assert "SCHED_FIFO 50: Operation not permitted (needs root, CAP_SYS_NICE" in warnings[0]
    assert "mlockall: Operation not permitted (needs CAP_IPC_LOCK" in warnings[0]
    assert "cpus [0]: Operation not permitted" in warnings[0]
    values = threads.diagnostic_values()
    assert values["realtime"] == "true" and values["realtime_policy"] == "SCHED_OTHER"
    assert "SCHED_FIFO 50: Operation not permitted" in values["realtime_refused"]


def test_fifo_by_default_without_locked_memory():
    """As ros2_control's controller manager: SCHED_FIFO 50 is asked for by default; memory locking is opt-in."""
    applied: list[object] = []
    calls = SystemCalls(
        set_scheduler=lambda tid, policy, param: applied.append((policy, param.sched_priority)),
        set_affinity=None,  # type: ignore[arg-type]
        get_affinity=None,  # type: ignore[arg-type]
        lock_memory=lambda: applied.append("mlockall"),
    )
    report = apply_realtime(RealtimeParameters(), "tick loop", calls=calls)
    assert applied == [(SCHED_FIFO, 50)] and report.policy == "SCHED_FIFO 50" and not report.memory_locked


def test_off_calls_nothing():
    calls = SystemCalls(set_scheduler=None, set_affinity=None, get_affinity=None, lock_memory=None)  # type: ignore[arg-type]
    report = apply_realtime(RealtimeParameters(realtime=False), "tick loop", calls=calls)
    assert not report.requested and report.policy == "SCHED_OTHER" and report.refused == ()
    assert report.diagnostic_values()["realtime"] == "false"


def test_a_cpu_the_process_cannot_use_is_refused_and_the_rest_applied():
    applied = []
    calls = SystemCalls(
        set_scheduler=lambda tid, policy, param: applied.append((policy, param.sched_priority)),
        set_affinity=lambda tid, cpus: applied.append(cpus),
        get_affinity=lambda tid: {0, 1},
        lock_memory=lambda: applied.append("mlockall"),
    )
    settings = RealtimeParameters(realtime=True, realtime_cpus=(1, 7), realtime_lock_memory=True)
    report = apply_realtime(settings, "simulation loop", calls=calls)
    assert report.refused == ("cpus [1, 7]: CPUs [7] are not among the process's [0, 1]",)
    assert applied == ["mlockall", (os.SCHED_FIFO, 50)] and report.memory_locked and report.fifo_priority == 50


def test_a_loop_that_never_sleeps_is_not_made_sched_fifo():
    calls = SystemCalls(set_scheduler=None, set_affinity=None, lock_memory=lambda: None)  # type: ignore[arg-type]
    report = apply_realtime(ON, "simulation loop", fifo_refusal="mode fast never sleeps", calls=calls)
    assert report.policy == "SCHED_OTHER" and report.refused == ("SCHED_FIFO: mode fast never sleeps",)


def test_a_platform_without_the_calls_reports_them_unavailable():
    from lerobot_ros.realtime import _unsupported

    missing = _unsupported("sched_setscheduler")
    calls = SystemCalls(set_scheduler=missing, set_affinity=missing, get_affinity=missing, lock_memory=lambda: None)
    settings = RealtimeParameters(realtime=True, realtime_cpus=(0,), realtime_lock_memory=True)
    report = apply_realtime(settings, "tick loop", calls=calls)
    assert report.refused == (
        "cpus [0]: os.sched_setscheduler is not available on this platform",
        "SCHED_FIFO 50: os.sched_setscheduler is not available on this platform",
    )
    assert report.memory_locked and report.policy == "SCHED_OTHER"
