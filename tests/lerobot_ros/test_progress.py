"""Progress output: a tqdm bar on a terminal, a few plain lines in a log, nothing when switched off."""

from __future__ import annotations

import io

import pytest

from lerobot_ros.progress import ENV_SWITCH, SparseProgress, progress_bar, progress_disabled


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_job_in_a_log_writes_a_line_per_tenth_or_interval_not_per_update() -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = SparseProgress(stream, "train act", "step", total=10_000, clock=clock)
    for _ in range(10_000):
        clock.now += 0.01  # 100 updates per second, like the demo's training
        progress.update(1)
    progress.set_postfix(loss="0.0361")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert 10 <= len(lines) <= 11  # every 10 s (= 10 %) and the end, instead of 10,000 updates
    assert lines[-1].startswith("train act: 10000/10000 (100 %) step, 100 step/s")
    assert "\r" not in stream.getvalue()


def test_time_interval_applies_when_the_total_is_unknown() -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = SparseProgress(stream, "bag2dataset", "frame", clock=clock)
    for _ in range(3000):
        clock.now += 0.1
        progress.update(1)
    progress.close()
    assert 29 <= len(stream.getvalue().splitlines()) <= 31  # about one line per 10 s over 300 s, and the last


def test_switch_and_streams_choose_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv(ENV_SWITCH, raising=False)
    assert isinstance(progress_bar("x", "step", total=3, stream=io.StringIO()), SparseProgress)
    bar = progress_bar("x", "step", total=3, stream=Terminal())
    assert bar is not None and not isinstance(bar, SparseProgress)
    bar.close()
    monkeypatch.setenv(ENV_SWITCH, "1")
    assert progress_disabled() and progress_bar("x", "step", stream=Terminal()) is None
    assert not progress_disabled({ENV_SWITCH: "0"})
