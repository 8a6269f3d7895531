"""kill -9 of the live recorder at many points (recording, saving, reset, start-up), one growing dataset.

One synthetic_streams process publishes the small contract's topics (joints 100 Hz, two 320x240 cameras
30 Hz); kill point k starts a recorder on the same root (``resume:=true`` once it holds a dataset; 1 s
episodes, 0.2 s resets), waits until it records, then ``5k mod 12`` quarter seconds (so the kills cycle through
recording, saving, reset and the next episode) and SIGKILLs it. Afterwards every episode saved before must
still be there,
unchanged, `validate` must pass (or, before the first save ever, refuse with one line) and every episode must
read back; on sampled points LeRobot's own loader must load it too. A recorder that prints a traceback
is a crash; one that never gets to recording within the budget a hang.

Default run: 3 kill points; `make reliability`: 100.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from converter_kill_points import REF_PYTHON, reference_load
from fuzz_harness import Counts, Finding

from lerobot_dataset.reader import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_ros.dds import clean_stale_shm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_recorder" / "recorder"))
from recorder_helpers import start_recorder, start_streams

START_BUDGET_S = 60.0
KILL_BUDGET_S = 60.0


def episode_lengths(root: Path) -> list[int]:
    with DatasetReader(root) as reader:
        lengths = []
        for index in range(reader.num_episodes):
            start, stop = reader.episode_range(index)
            reader[start]
            reader[stop - 1]
            lengths.append(stop - start)
        return lengths


def campaign(processes, tmp_path: Path, points: int, reference_every: int) -> Counts:
    counts = Counts("recorder_kill")
    begin = time.monotonic()
    root = tmp_path / "ds"
    start_streams(processes)
    saved: list[int] = []
    for k in range(points):
        resume = (root / "meta" / "info.json").is_file()  # a root left before its first save is taken over
        recorder = start_recorder(
            processes,
            root,
            name=f"recorder-{k}",
            resume=resume,
            episode_time_s=1.0,
            reset_time_s=0.2,
            num_episodes=10**6,
        )
        outcome, detail = "ok", ""
        try:
            recorder.wait_for_output(r"recording .* fps into", timeout=START_BUDGET_S)
        except AssertionError:
            outcome, detail = "hang", f"no 'recording' within {START_BUDGET_S} s:\n{recorder.output()[-2000:]}"
        else:
            time.sleep(0.25 * (5 * k % 12))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(recorder.pid, signal.SIGKILL)  # the whole group: an encoder child dies with it
        try:
            recorder.wait(KILL_BUDGET_S)
        except subprocess.TimeoutExpired:
            outcome, detail = "hang", f"still running {KILL_BUDGET_S} s after SIGKILL (uninterruptible I/O?)"
        clean_stale_shm()  # the killed recorder's 16 MB shared-memory segment
        if outcome != "hang" and "Traceback" in recorder.output():
            outcome, detail = "crash", recorder.output()[-3000:]
        if outcome == "ok" and root.exists():
            problems = validate(root)
            if problems:
                text = str(problems[0])
                if saved or "\n" in text.strip():
                    outcome, detail = "data_lost", f"after the kill, with {len(saved)} saved episodes: {text}"
                else:
                    outcome, detail = "clear_error", f"killed before the first save: {text}"
            else:
                try:
                    lengths = episode_lengths(root)
                except Exception as err:
                    lengths = []
                    outcome, detail = "data_lost", f"valid but does not load: {type(err).__name__}: {err}"
                if outcome == "ok" and lengths[: len(saved)] != saved:
                    outcome, detail = "data_lost", f"saved episodes were {saved}, now {lengths}"
                if outcome == "ok":
                    saved = lengths
                    if REF_PYTHON.exists() and reference_every and k % reference_every == 0:
                        error = reference_load(root, tmp_path)
                        counts.extra["reference_checked"] = counts.extra.get("reference_checked", 0) + 1
                        if error is not None:
                            outcome, detail = "data_lost", f"validate passed but LeRobot cannot load it: {error}"
        counts.add(outcome, Finding(counts.target, outcome, 0, k, f"kill point {k}", detail))
        if outcome == "data_lost" and root.exists():
            shutil.copytree(root, tmp_path / f"lost-{k}")  # kept for a look; the campaign goes on fresh
            shutil.rmtree(root)
            saved = []
        processes_alive = [p for p in processes if p.returncode is None and p.name.startswith("recorder-")]
        for p in processes_alive:
            p.send_signal(signal.SIGKILL)
    counts.extra["episodes_saved"] = len(saved)
    counts.seconds = time.monotonic() - begin
    return counts


@pytest.mark.ros
def test_recorder_kill_points_quick(processes, ros_domain, tmp_path: Path, reliability_results) -> None:
    counts = campaign(processes, tmp_path, 3, reference_every=0)
    reliability_results(counts)
    assert counts.bad == 0, counts.summary()


@pytest.mark.ros
@pytest.mark.reliability
def test_recorder_kill_points_full(processes, ros_domain, tmp_path: Path, reliability_results) -> None:
    counts = campaign(processes, tmp_path, 100, reference_every=10)
    reliability_results(counts)
    assert counts.tried == 100
    assert counts.bad == 0, counts.summary()
