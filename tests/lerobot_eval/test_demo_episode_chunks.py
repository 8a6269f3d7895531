"""The real-time demo evaluation counts an episode's chunks from the first one computed on its observations.

The episode starts only once a chunk for its first observation has arrived (the executor starts with it). On a
loaded host inference can take longer than a short episode: then that chunk is the only one the episode used, and
it must be counted (it was not: a 1 s quick-demo episode reported 0 chunks and failed the e2e check under load).
The supervisor here is scripted: each spin of the node is one event of a timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import rclpy

from lerobot_eval.demo import evaluate
from lerobot_eval.demo.workspace import DemoLayout, DemoSettings
from lerobot_eval.failure_causes import DiagnosticsLog

START_STAMP = 100.0


class ScriptedStack:
    alive = True
    log = Path("eval.log")


class ScriptedSupervisor:
    """Chunks and sim steps arrive as the timeline says; the episode ends after 30 steps (1 s at 30 fps)."""

    def __init__(self, chunks_after_enable: int) -> None:
        self.node = object()
        self.ends: list[str] = []
        self.end_times: list[float] = []
        self.steps: dict[int, int] = {}
        self.end_steps: dict[int, int] = {}
        self.frames: list[Any] | None = None
        self.diagnostics = DiagnosticsLog()
        # A chunk of the previous episode, still arriving before the reset.
        self.chunks: list[dict[str, Any]] = [self._chunk(7, START_STAMP - 5.0)]
        self.enabled = False
        self.reset_done = False
        self._after_enable = chunks_after_enable

    @staticmethod
    def _chunk(chunk_id: int, stamp: float) -> dict[str, Any]:
        return {"chunk_id": chunk_id, "stamp": stamp, "latency_s": 1.5, "inference_s": 1.4, "horizon": 100}

    def set_enabled(self, enabled: bool, stack: Any) -> None:
        self.enabled = enabled

    def watch_camera(self, stack: Any) -> None:
        raise AssertionError("no GIF episodes in this test")

    def unwatch_camera(self) -> None:
        self.frames = None

    def reset(self, seed: int, stack: Any) -> tuple[float, int]:
        self.reset_done = True
        return START_STAMP, 1

    def spin(self) -> None:
        """One event: the slow first chunk before the executor is enabled; then steps (and maybe chunks) to the end."""
        if not self.reset_done:
            return
        if not self.enabled:
            if len(self.chunks) == 1:
                self.chunks.append(self._chunk(8, START_STAMP))
            return
        step = self.steps.get(1, 0) + 10
        self.steps[1] = step
        if self._after_enable and step == 20:
            self.chunks.append(self._chunk(9, START_STAMP + 0.6))
        if step >= 30 and not self.ends:
            self.end_steps[1] = 30
            self.ends.append("time_limit")
            self.end_times.append(evaluate.time.monotonic())


def run_episode(monkeypatch, tmp_path: Path, supervisor: ScriptedSupervisor) -> dict[str, Any]:
    monkeypatch.setattr(rclpy, "spin_once", lambda node, timeout_sec=None: supervisor.spin())
    monkeypatch.setattr(evaluate, "REPORT_WAIT_S", 0.0)
    layout = DemoLayout(tmp_path)
    layout.eval.mkdir(parents=True)
    settings = DemoSettings(eval_max_s=1.0, gif_episodes=0)
    return evaluate._episode(supervisor, ScriptedStack(), settings, 0, (4, "weights"), layout)  # type: ignore[arg-type]


def test_an_episode_shorter_than_inference_counts_the_chunk_it_started_with(monkeypatch, tmp_path):
    row = run_episode(monkeypatch, tmp_path, ScriptedSupervisor(chunks_after_enable=0))
    assert (row["end"], row["chunks"]) == ("time_limit", 1)


def test_the_previous_episodes_chunks_are_not_counted(monkeypatch, tmp_path):
    row = run_episode(monkeypatch, tmp_path, ScriptedSupervisor(chunks_after_enable=1))
    assert row["chunks"] == 2
    logged = (DemoLayout(tmp_path).chunk_log).read_text().splitlines()
    assert [line.count('"chunk_id": 8') + line.count('"chunk_id": 9') for line in logged] == [1, 1]
