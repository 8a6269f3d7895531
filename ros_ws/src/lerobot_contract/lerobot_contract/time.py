"""Time units shared by every package: stamps and durations are integer nanoseconds."""

from __future__ import annotations

NS = 1_000_000_000  # nanoseconds per second
