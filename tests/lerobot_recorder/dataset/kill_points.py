"""kill -9 at every step of the dataset writer's file protocol (issue 18 #4); reusable by tests/reliability.

A forked child records `EPISODES` episodes (a video and an image camera, vectors) into a dataset and SIGKILLs
itself when it is about to make its k-th file-system call among `STEP_CALLS` (every rename, fsync, unlink,
mkdir and rmdir of `create`, the episode staging and the commit journal). After each kill:

* `validate` must either pass, or explain the state: a decided commit with files still to move (the next
  open finishes it), or a root without a committed episode (the next create takes it over);
* when it passes, every episode reported saved is there with the frames that were written, and LeRobot's
  loader (reference venv, strict counts: reference_check.py) agrees;
* re-running the same recording (open, or create over an uncommitted root, as the recorder and bag2dataset
  do) completes, and the final dataset holds every episode with its frames, valid for validate and LeRobot.

Use from another test (tests/reliability runs it with ``points=100`` or more):

    sys.path.insert(0, str(REPO / "tests/lerobot_recorder/dataset"))
    from kill_points import sweep
    result = sweep(tmp_path, points=100, reference=True)
    print(result.summary()); assert result.failures == []
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from dataset_synthetic import camera_features, make_frame

from lerobot_dataset import DatasetReader, DatasetWriter
from lerobot_dataset.commit import uncommitted_dataset
from lerobot_dataset.layout import INFO_PATH
from lerobot_dataset.validate import validate

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
REF_PYTHON = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", REPO / ".venv-lerobot-ref")) / "bin" / "python"
LENGTHS = (4, 6, 5)
EPISODES = len(LENGTHS)
TASKS = ("pick", "place")
CODEC = "h264-ultrafast"
FEATURES = camera_features()
STEP_CALLS = ("replace", "rename", "fsync", "unlink", "mkdir", "rmdir")


def record(root: Path, on_saved: Callable[[int], None] = lambda _i: None) -> None:
    """Record episodes until the dataset holds EPISODES: open it, or create it (over an uncommitted root)."""
    if (root / INFO_PATH).is_file() and not uncommitted_dataset(root):
        writer = DatasetWriter.open(root, video_codec=CODEC)
    else:
        writer = DatasetWriter.create(root, repo_id="local/kill", fps=30, features=FEATURES, video_codec=CODEC)
    with writer:
        for episode in range(writer.num_episodes, EPISODES):
            writer.start_episode(TASKS[episode % len(TASKS)])
            for step in range(LENGTHS[episode]):
                writer.add_frame(make_frame(writer.features, episode, step, LENGTHS[episode]))
            writer.save_episode()
            on_saved(episode)


@contextmanager
def _kill_at(step: int | None, counter: list[int]) -> Iterator[None]:
    """Count the STEP_CALLS made in this process; SIGKILL it just before call number `step`."""
    originals = {name: getattr(os, name) for name in STEP_CALLS}

    def counting(name: str) -> Callable[..., Any]:
        original = originals[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            counter[0] += 1
            if counter[0] == step:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)

        return call

    for name in STEP_CALLS:
        setattr(os, name, counting(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(os, name, original)


@dataclass
class Run:
    """What a forked recording reported: the episodes it saved, its step count, how it ended."""

    saved: list[int]
    steps: int
    killed: bool
    error: str = ""


def run_recording(root: Path, kill_at: int | None = None) -> Run:
    """Record into `root` in a forked child, killed (SIGKILL) before its `kill_at`-th step when given."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test
        status = 0
        try:
            os.close(read_fd)
            counter = [0]

            def report(episode: int) -> None:
                os.write(write_fd, f"SAVED {episode}\n".encode())

            with _kill_at(kill_at, counter):
                record(root, report)
            os.write(write_fd, f"STEPS {counter[0]}\n".encode())
        except BaseException as err:  # reported to the parent, which fails the point
            os.write(write_fd, f"ERROR {type(err).__name__}: {err}\n".replace("\n", " ").encode() + b"\n")
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        lines = pipe.read().splitlines()
    _, wait_status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) == signal.SIGKILL
    run = Run(saved=[], steps=0, killed=killed)
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "SAVED":
            run.saved.append(int(rest))
        elif word == "STEPS":
            run.steps = int(rest)
        elif word == "ERROR":
            run.error = rest
    return run


def content_problems(root: Path, at_least: int) -> list[str]:
    """Episodes missing or different from what `record` wrote (the first `at_least` must be there)."""
    problems: list[str] = []
    with DatasetReader(root) as reader:
        if reader.num_episodes < at_least:
            problems.append(f"{reader.num_episodes} episodes, but {at_least} were reported saved")
        for episode in range(reader.num_episodes):
            start, end = reader.episode_range(episode)
            if end - start != LENGTHS[episode]:
                problems.append(f"episode {episode} has {end - start} frames, {LENGTHS[episode]} were written")
                continue
            for step in range(end - start):
                item = reader[start + step]
                expected = make_frame(FEATURES, episode, step, LENGTHS[episode])
                if not np.array_equal(np.asarray(item["observation.state"]), expected["observation.state"]):
                    problems.append(f"episode {episode} frame {step} holds other values than were written")
                    break
    return problems


EXPLAINED = ("a commit was interrupted after it was decided", "holds no committed episode")


@dataclass
class SweepResult:
    """Counts of a sweep (`summary()`), the failures (empty when the writer kept every promise)."""

    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    steps_per_run: int = 0

    def summary(self) -> str:
        return ", ".join(f"{key} {value}" for key, value in sorted(self.counts.items()))


def _judge(root: Path, run: Run, result: SweepResult, label: str) -> str:
    """Classify the state a kill left; returns the kind ('valid', 'pending', 'uncommitted', 'absent')."""
    if not (root / INFO_PATH).is_file():
        if run.saved:
            result.failures.append(f"{label}: info.json is gone but episodes {run.saved} were saved")
        return "absent"
    problems = validate(root)
    if not problems:
        for problem in content_problems(root, len(run.saved)):
            result.failures.append(f"{label}: valid, but {problem}")
        return "valid"
    unexplained = [p for p in problems if not any(text in p.message for text in EXPLAINED)]
    explained = [p for p in problems if p not in unexplained]
    if not explained:
        result.failures.append(f"{label}: validate reports {[str(p) for p in problems]}")
        return "unexplained"
    if "holds no committed episode" in explained[0].message:
        if run.saved:
            result.failures.append(f"{label}: no committed episode, but episodes {run.saved} were saved")
        return "uncommitted"
    return "pending"


def kill_points(total_steps: int, points: int) -> list[tuple[int, int | None]]:
    """`points` (first kill, kill during the re-run or None) pairs spread over the steps of a run."""
    firsts = sorted({round(float(x)) for x in np.linspace(1, total_steps, min(points, total_steps))})
    pairs: list[tuple[int, int | None]] = [(k, None) for k in firsts]
    extra = 0
    while len(pairs) < points:  # more points than steps: kill the re-run too, at spread-out steps
        k = firsts[(extra * 7) % len(firsts)]
        pairs.append((k, 1 + (extra * 13) % max(total_steps // 2, 1)))
        extra += 1
    return pairs


def reference_check(roots: list[Path], workdir: Path) -> dict[str, str | None]:
    """LeRobot's loader on each root (reference venv, strict counts): root -> None (ok) or the error."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(workdir / "hf-home"), HF_LEROBOT_HOME=str(workdir / "hf-lerobot"))
    out = subprocess.run(
        [str(REF_PYTHON), str(HERE / "reference_check.py"), *map(str, roots)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    answers = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            answers[entry["root"]] = entry["error"]
    missing = [str(r) for r in roots if str(r) not in answers]
    if missing:
        raise AssertionError(f"reference_check.py answered nothing for {missing}: {out.stderr[-3000:]}")
    return answers


def sweep(workdir: Path, points: int = 30, reference: bool = False) -> SweepResult:
    """Kill a recording at `points` steps of the writer protocol; judge each state, re-run, judge again.

    With `reference`, LeRobot's loader (reference venv) checks every state validate passed and every
    final dataset; a disagreement is a failure. Counts: tried, valid/pending/uncommitted/absent after the
    kill, rerun_ok, data_lost, unexplained, reference_checked/reference_failed, and how LeRobot's loader fares
    on the states validate refuses because a decided commit is still to be finished ("pending": validate is
    stricter there; the next open completes the commit).
    """
    result = SweepResult()
    dry = run_recording(workdir / "dry-run")
    if dry.error or dry.killed or dry.saved != list(range(EPISODES)):
        raise AssertionError(f"the recording does not run without a kill: {dry}")
    result.steps_per_run = dry.steps
    to_reference: dict[Path, str] = {}
    pending: list[Path] = []  # states validate refuses (a commit to finish): how LeRobot fares is counted only
    for i, (first, second) in enumerate(kill_points(dry.steps, points)):
        label = f"kill at step {first}/{dry.steps}" + (f", re-run killed at step {second}" if second else "")
        root = workdir / f"point-{i:03d}" / "ds"
        root.parent.mkdir(parents=True)
        result.counts["tried"] += 1
        run = run_recording(root, first)
        if not run.killed:
            result.failures.append(f"{label}: the child was not killed ({run})")
            continue
        kind = _judge(root, run, result, label)
        result.counts[f"{kind} after kill"] += 1
        if kind in ("valid", "pending") and reference:
            snapshot = root.parent / "at-kill"
            shutil.copytree(root, snapshot, symlinks=True)
            if kind == "valid":
                to_reference[snapshot] = f"{label}: validate passed the state at the kill"
            else:
                pending.append(snapshot)
        if second is not None:
            again = run_recording(root, second)
            saved = sorted(set(run.saved) | set(again.saved))
            kind = _judge(root, Run(saved, 0, again.killed), result, f"{label} (second kill)")
            result.counts[f"{kind} after second kill"] += 1
        final = run_recording(root)
        if final.error or final.killed:
            result.counts["rerun_failed"] += 1
            result.failures.append(f"{label}: the re-run failed: {final.error or 'killed'}")
            continue
        result.counts["rerun_ok"] += 1
        problems = [str(p) for p in validate(root)]
        lost = content_problems(root, EPISODES)
        if problems or lost:
            result.counts["data_lost"] += 1
            result.failures.append(f"{label}: after the re-run: {problems + lost}")
        elif reference:
            to_reference[root] = f"{label}: the re-run's dataset"
    if reference and to_reference:
        answers = reference_check([*to_reference, *pending], workdir)
        for path in pending:
            strict = "loads" if answers[str(path)] is None else "fails"
            result.counts[f"pending: LeRobot strictly {strict}"] += 1
        for path, what in to_reference.items():
            result.counts["reference_checked"] += 1
            if answers[str(path)] is not None:
                result.counts["reference_failed"] += 1
                result.failures.append(f"{what}, LeRobot's loader does not: {answers[str(path)]}")
    return result
