"""A child process that is signalled when the process that started it dies, even by SIGKILL (Linux prctl).

Pass `parent_death_signal(sig)` as `subprocess.Popen(..., preexec_fn=...)`. The kernel sends `sig` to the
child when the *thread* that forked it exits, so start such children from a thread that lives as long as they
should (the main thread). Only the direct child is signalled: a launcher must stop its own children on `sig`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def parent_death_signal(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None]:
    """A pre-exec hook that makes the child receive `sig` when this process dies (a no-op off Linux).

    prctl is looked up here, before the fork, so the child makes one foreign call. A parent that died between
    the fork and the prctl call would never send the signal: the child then exits at once.
    """
    if not sys.platform.startswith("linux"):
        return lambda: None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:
            os._exit(1)

    return hook
