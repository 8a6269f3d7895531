"""Extra CPU load for benchmarks that measure under it: `with busy_loops(n):` runs n busy-loop processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` processes each keeping one core busy for the duration of the block (0: none); killed on exit."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
