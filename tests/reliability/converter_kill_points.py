"""kill -9 at many points of a bag2dataset conversion; after each kill the dataset must be sound.

Runs in a spawned worker process (`run_campaign`), which imports the CLI once and forks one child per kill
point running ``lerobot-ros bag2dataset`` (the CLI's own `main`), so a kill lands in the conversion rather
than in interpreter start-up. Kill point k of n waits until the child has created the output root, then
``k/n`` of the conversion's measured duration (spread over 110 % of it, so a few land after the end), then
SIGKILLs the child. Afterwards:

* `validate` on what is left: valid, or a clear one-line refusal (e.g. a root with no committed episode);
* when valid: every frame of every committed episode reads back (`DatasetReader`), and on sampled points LeRobot's
  own `LeRobotDataset` loads it too (when the reference venv exists) -- validate must agree with it;
* the same command run again (resume) finishes within the budget and leaves exactly the reference dataset:
  same episodes, same frame counts, nothing duplicated.

Outcomes as in fuzz_harness: ok / clear_error (the intermediate state was refused clearly, and the re-run
completed it) / crash / hang / data_lost.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from fuzz_harness import Counts, Finding

REPO = Path(__file__).resolve().parents[2]
REF_PYTHON = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", REPO / ".venv-lerobot-ref")) / "bin" / "python"
REFERENCE_LOAD = Path(__file__).resolve().parent / "reference_load.py"
BAGS = 4
RERUN_BUDGET_S = 120.0


def make_inputs(work: Path) -> tuple[list[Path], Path]:
    """Synthetic bags (one camera encoded as video, joints) and their contract."""
    import yaml

    from lerobot_bags.synthetic import SyntheticBagSpec, contract_for, write_synthetic_bag
    from lerobot_contract.time import NS

    bags = []
    spec = SyntheticBagSpec()
    for i in range(BAGS):
        spec = SyntheticBagSpec(
            duration_s=2.0, cameras=("front",), height=48, width=64, seed=i, start_ns=(1_700_000_000 + 10 * i) * NS
        )
        bags.append(write_synthetic_bag(work / f"bag{i}", spec))
    contract = work / "contract.yaml"
    contract.write_text(yaml.safe_dump(contract_for(spec, camera_dtype="video").to_dict()))
    return bags, contract


def _child(argv: list[str], stderr: Path | None) -> None:
    """The forked child: the CLI, then exit without running the parent's atexit handlers."""
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) if stderr else devnull, 2)
        from lerobot_ros.cli import main

        code = main(argv)
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 99
    finally:
        sys.stderr.flush()
        os._exit(code)


def fork_cli(argv: list[str], stderr: Path | None = None) -> int:
    pid = os.fork()
    if pid == 0:
        _child(argv, stderr)
    return pid


def wait_pid(pid: int, timeout: float) -> int | None:
    """Exit code of child `pid`, or None when it is still running after `timeout` s (then it is killed)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def episode_lengths(root: Path) -> list[int]:
    from lerobot_dataset.reader import DatasetReader

    with DatasetReader(root) as reader:
        lengths = []
        for index in range(reader.num_episodes):
            start, stop = reader.episode_range(index)
            for i in range(start, stop):
                reader[i]  # every frame, video decoded
            lengths.append(stop - start)
        return lengths


def reference_load(root: Path, work: Path) -> str | None:
    """None when LeRobot's loader reads the dataset (first and last frame of each episode), else its error."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf-home"), HF_LEROBOT_HOME=str(work / "hf-lerobot"))
    result = subprocess.run(
        [str(REF_PYTHON), str(REFERENCE_LOAD), str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode == 0:
        return None
    return (result.stderr.strip().splitlines() or ["no output"])[-1]


def run_campaign(points: int, reference_every: int, out: Any) -> None:
    """Worker entry (spawned): run the kill points, send the Counts back through `out`."""
    import tempfile

    counts = Counts("bag2dataset_kill")
    begin = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kill-bag2dataset-") as tmp:
        work = Path(tmp)
        bags, contract = make_inputs(work)
        argv = ["bag2dataset", *map(str, bags), "--contract", str(contract), "--task", "t", "--quiet", "--output"]
        reference_root = work / "reference"
        started = time.monotonic()
        assert wait_pid(fork_cli([*argv, str(reference_root)]), RERUN_BUDGET_S) == 0, "the reference conversion failed"
        duration = time.monotonic() - started
        expected = episode_lengths(reference_root)
        use_reference = REF_PYTHON.exists() and reference_every > 0
        for k in range(points):
            root = work / f"kill{k}"
            outcome, detail = "ok", ""
            try:
                outcome, detail = one_point(
                    argv, root, k, points, duration, expected, use_reference and k % reference_every == 0, work
                )
            except Exception:
                outcome, detail = "crash", traceback.format_exc()
            finding = Finding(counts.target, outcome, 0, k, f"kill point {k}/{points}", detail)
            counts.add(outcome, finding if outcome not in ("ok", "clear_error") else None)
            if detail.startswith("reference:"):
                counts.extra["reference_checked"] = counts.extra.get("reference_checked", 0) + 1
            shutil.rmtree(root, ignore_errors=True)
            for extra in root.parent.glob(f"{root.name}.*"):
                extra.unlink()
    counts.seconds = time.monotonic() - begin
    out.send(counts)


def one_point(
    argv: list[str],
    root: Path,
    k: int,
    points: int,
    duration: float,
    expected: list[int],
    check_reference: bool,
    work: Path,
) -> tuple[str, str]:
    from lerobot_dataset.validate import validate

    pid = fork_cli([*argv, str(root)])
    deadline = time.monotonic() + RERUN_BUDGET_S
    while not root.exists() and time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.002)
    else:
        time.sleep(duration * 1.1 * k / points)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    outcome, detail = "ok", ""
    if root.exists():
        problems = validate(root)
        if problems:
            text = str(problems[0])
            if "\n" in text.strip():
                return "crash", f"validate's problem is not one line: {text!r}"
            outcome, detail = "clear_error", f"validate after the kill: {text}"
        else:
            try:
                lengths = episode_lengths(root)
            except Exception as err:
                return "data_lost", f"validate passed but the dataset does not load: {type(err).__name__}: {err}"
            if lengths != expected[: len(lengths)]:
                return "data_lost", f"episodes after the kill hold {lengths} frames, the reference {expected}"
            if check_reference:
                error = reference_load(root, work)
                if error is not None:
                    return "data_lost", f"reference: validate passed but LeRobot cannot load it: {error}"
                detail = "reference: LeRobot loads it"
    code = wait_pid(fork_cli([*argv, str(root)]), RERUN_BUDGET_S)
    if code is None:
        return "hang", f"the re-run did not finish within {RERUN_BUDGET_S} s"
    if code != 0:
        return "data_lost", f"the re-run after the kill failed (exit {code}); the dataset cannot be completed"
    problems = validate(root)
    if problems:
        return "data_lost", f"after the re-run validate says: {problems[0]}"
    lengths = episode_lengths(root)
    if lengths != expected:
        return "data_lost", f"after the re-run the episodes hold {lengths} frames, the reference {expected}"
    return outcome, detail


def disk_full_campaign(sizes: int, out: Any) -> None:
    """Worker entry (spawned): bag2dataset onto a tmpfs of `sizes` sizes (4 KiB up to 1.2x the dataset's size).

    Each run must either finish with the reference dataset or stop with one line that says the disk is full;
    what it leaves must validate (or be refused clearly) and every committed episode must load.
    """
    import tempfile

    from lerobot_dataset.validate import validate

    counts = Counts("bag2dataset_disk_full")
    begin = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="diskfull-bag2dataset-") as tmp:
        work = Path(tmp)
        bags, contract = make_inputs(work)
        argv = ["bag2dataset", *map(str, bags), "--contract", str(contract), "--task", "t", "--quiet", "--output"]
        reference_root = work / "reference"
        assert wait_pid(fork_cli([*argv, str(reference_root)]), RERUN_BUDGET_S) == 0, "the reference conversion failed"
        expected = episode_lengths(reference_root)
        total = sum(p.stat().st_size for p in reference_root.rglob("*") if p.is_file())
        mount = work / "mnt"
        mount.mkdir()
        for i in range(sizes):
            size = int(4096 * (1.2 * total / 4096) ** (i / max(1, sizes - 1)))
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
            try:
                root = mount / "out"
                errfile = work / "stderr.txt"
                code = wait_pid(fork_cli([*argv, str(root)], errfile), RERUN_BUDGET_S)
                err = errfile.read_text(errors="replace").strip()
                outcome, detail = "ok", f"{size} bytes: finished"
                if code is None:
                    outcome, detail = "hang", f"{size} bytes: no end within {RERUN_BUDGET_S} s"
                elif "Traceback" in err or code == 99:
                    outcome, detail = "crash", f"{size} bytes: exit {code}\n{err[-3000:]}"
                elif code != 0:
                    last = err.splitlines()[-1] if err else ""
                    full = any(w in last.lower() for w in ("no space", "disk full", "enospc", "full"))
                    outcome = "clear_error" if full else "crash"
                    detail = f"{size} bytes: exit {code}: {last}"
                if outcome in ("ok", "clear_error") and root.exists():
                    problems = validate(root)
                    if not problems:
                        try:
                            lengths = episode_lengths(root)
                        except Exception as exc:
                            outcome, detail = "data_lost", f"{size} bytes: valid but does not load: {exc}"
                        else:
                            if lengths != expected[: len(lengths)] or (code == 0 and lengths != expected):
                                outcome, detail = "data_lost", f"{size} bytes: episodes {lengths}, reference {expected}"
                    elif code == 0:
                        outcome, detail = "data_lost", f"{size} bytes: finished but validate says {problems[0]}"
                finding = Finding(counts.target, outcome, 0, i, f"tmpfs of {size} bytes", detail)
                counts.add(outcome, finding if outcome not in ("ok", "clear_error") else None)
            finally:
                subprocess.run(["umount", str(mount)], check=True)
        counts.extra["dataset_bytes"] = total
    counts.seconds = time.monotonic() - begin
    out.send(counts)


def run(points: int, reference_every: int = 0, timeout_s: float = 3600.0, disk_full: bool = False) -> Counts:
    """Run the campaign in a spawned worker (fork-safe: it has no threads when it forks)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    target, args = (
        (disk_full_campaign, (points, child)) if disk_full else (run_campaign, (points, reference_every, child))
    )
    proc = ctx.Process(target=target, args=args, daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            raise RuntimeError(f"the kill campaign did not finish within {timeout_s} s")
        counts: Counts = parent.recv()
        return counts
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)


def summary_json(counts: Counts) -> str:
    return json.dumps(counts.as_dict())
