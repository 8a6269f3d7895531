"""Data-parallel training through torchrun (gloo on CPU), as `lerobot-ros train --nproc N` runs it:
without dropout, 2 ranks at batch B follow 1 process at batch 2B to float precision for the first steps (the
rounding compounds later; with dropout each rank draws its own masks, see training/README.md), the logged
loss is the global batch's, a bad setting is refused before torchrun starts, a failing or dying rank stops
the run with one clear line and a loadable last checkpoint, and 2 "machines" (network namespaces joined by a
veth pair) train together."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import TINY, VECTOR_INPUTS

from lerobot_training.checkpoint import WEIGHTS_NAME, load_policy
from lerobot_training.distributed import DistributedContext
from lerobot_training.errors import TrainingError

pytestmark = pytest.mark.slow

DETERMINISTIC_ACT = [f"--set={k}={v}" for k, v in {**TINY["act"], "use_vae": "false", "dropout": 0.0}.items()]


def train_args(dataset: Path, out: Path, *extra: str) -> list[str]:
    features = [item for key in VECTOR_INPUTS for item in ("--feature", key)]
    return [
        sys.executable, "-m", "lerobot_ros.cli", "train", "--dataset", str(dataset), "--policy", "act",
        "--out", str(out), "--seed", "5", "--warmup-steps", "1", "--val-fraction", "0", "--threads", "1",
        "--no-progress", "--lr", "1e-3", *features, *DETERMINISTIC_ACT, *extra,
    ]  # fmt: skip


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, check=False, env=env)


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run_dir / "checkpoints" / "last" / "pretrained_model" / WEIGHTS_NAME))


def test_context_comes_from_torchruns_environment() -> None:
    assert not DistributedContext.from_env({}).enabled
    context = DistributedContext.from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert context.enabled and not context.is_main and context.local_rank == 1
    assert context.device(torch.device("cuda")) == torch.device("cuda", 1)
    with pytest.raises(TrainingError, match="RANK=3 is not within WORLD_SIZE=2"):
        DistributedContext.from_env({"RANK": "3", "WORLD_SIZE": "2"})


def test_without_dropout_two_ranks_at_batch_b_follow_one_process_at_batch_2b_for_the_first_steps(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    """Dropout 0 and no VAE (no randomness in the forward pass): after 4 steps the weights differ by float
    rounding only (measured 5e-6 relative; it compounds: 1e-4 after 100 steps, 1.7e-3 after 300, and with ACT's
    dropout 0.1 the runs differ by 0.8 % after 4 steps: bench/bench_training_ddp_drift.py)."""
    single = run(train_args(tiny_dataset, tmp_path / "single", "--steps", "4", "--batch-size", "4", "--log-every", "1"))
    assert single.returncode == 0, single.stderr[-3000:]
    double = run(
        train_args(
            tiny_dataset, tmp_path / "ddp", "--steps", "4", "--batch-size", "2", "--nproc", "2", "--log-every", "1"
        )
    )
    assert double.returncode == 0, double.stderr[-3000:]
    expected, got = weights(tmp_path / "single"), weights(tmp_path / "ddp")
    assert expected.keys() == got.keys()
    difference = sum(float(((got[k].double() - expected[k].double()) ** 2).sum()) for k in expected) ** 0.5
    norm = sum(float((expected[k].double() ** 2).sum()) for k in expected) ** 0.5
    assert difference / norm < 1e-4, difference / norm
    # AdamW divides each step by sqrt(v): a parameter whose true gradient is zero (the attention key biases,
    # to which softmax is invariant) moves by float noise scaled up to ~lr. Those stay within 2 % of the
    # largest possible movement (lr x steps); every other tensor agrees to float precision.
    largest_move = 1e-3 * 4
    exact = 0
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=0, atol=0.02 * largest_move, msg=key)
        exact += bool(torch.allclose(got[key], expected[key], rtol=1e-5, atol=1e-6))
    assert exact >= 0.9 * len(expected), f"{exact} of {len(expected)} tensors equal to float precision"
    initial = run(train_args(tiny_dataset, tmp_path / "zero", "--steps", "1", "--batch-size", "4", "--lr", "0"))
    assert initial.returncode == 0, initial.stderr[-3000:]
    assert any(not torch.equal(weights(tmp_path / "zero")[k], expected[k]) for k in expected)  # training moved them
    rows = (tmp_path / "ddp" / "log.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == ["1", "2", "3", "4"]  # one row per step: rank 0 alone logs


def _logged(run_dir: Path, step: int) -> dict[str, str]:
    import csv

    with (run_dir / "log.csv").open(newline="") as handle:
        return next(row for row in csv.DictReader(handle) if row["split"] == "train" and int(row["step"]) == step)


def test_the_logged_loss_of_two_ranks_is_the_global_batchs(tiny_dataset: Path, tmp_path: Path) -> None:
    """Step 1 of 2 ranks x 2 samples logs the loss of the 4-sample global batch, which is one process's loss on
    those 4 samples (both start from the same weights). It used to log rank 0's half-batch loss (0.763 vs 0.672)."""
    for name, extra in {"single": ("--batch-size", "4"), "ddp": ("--batch-size", "2", "--nproc", "2")}.items():
        result = run(train_args(tiny_dataset, tmp_path / name, "--steps", "1", *extra))
        assert result.returncode == 0, result.stderr[-3000:]
    single, ddp = _logged(tmp_path / "single", 1), _logged(tmp_path / "ddp", 1)
    for column in ("loss", "l1_loss"):
        assert float(ddp[column]) == pytest.approx(float(single[column]), rel=1e-5), column  # 6 digits logged
    assert float(ddp["grad_norm"]) == pytest.approx(float(single["grad_norm"]), rel=1e-4)


def test_a_bad_setting_is_refused_in_one_line_before_torchrun_starts(tiny_dataset: Path, tmp_path: Path) -> None:
    """It used to print once per rank, then torchrun's ChildFailedError traceback (about 35 lines)."""
    for bad, said in (
        (("--steps", "0"), "lerobot-ros train: error: steps must be >= 1, got 0"),
        (
            ("--set", "chunk_size=abc"),
            "lerobot-ros train: error: config field 'chunk_size' must be an integer, got 'abc'",
        ),
    ):
        result = run(train_args(tiny_dataset, tmp_path / "run", "--batch-size", "2", "--nproc", "2", *bad))
        assert result.returncode == 2, result.stderr[-3000:]
        assert result.stderr.strip() == said, result.stderr[-3000:]
        assert not (tmp_path / "run").exists()


def test_a_rank_that_fails_ends_the_run_with_one_line(tiny_dataset: Path, tmp_path: Path) -> None:
    """A rank's own error (the loss diverges) is the run's one line, not each rank's line plus torchrun's report."""
    result = run(
        train_args(
            tiny_dataset, tmp_path / "run", "--batch-size", "2", "--nproc", "2", "--steps", "20", "--lr", "1e30",
            "--warmup-steps", "0", "--grad-clip-norm", "1e30",
        )
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("lerobot-ros train: error: distributed training failed: rank "), lines[0]
    assert "the loss became nan at step" in lines[0] and lines[0].endswith("no checkpoint saved")


def _children(pid: int) -> list[int]:
    result = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in result.stdout.split()]


@pytest.mark.extended
def test_a_rank_that_dies_stops_the_run_with_one_line_and_the_last_checkpoint_loads(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    args = train_args(tiny_dataset, out, "--steps", "100000", "--batch-size", "2", "--nproc", "2", "--save-every", "3")
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not list((out / "checkpoints").glob("*/training_state/state.json")):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.2)
        torchrun = _children(process.pid)
        workers = [child for parent in torchrun for child in _children(parent)]
        assert len(workers) == 2, (torchrun, workers)
        os.kill(workers[-1], signal.SIGKILL)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr[-3000:]  # no traceback of the surviving rank's broken collective, nor torchrun's
    last_line = lines[-1]
    assert last_line.startswith("lerobot-ros train: error: distributed training failed: rank "), last_line
    assert " was killed by SIGKILL; " in last_line, last_line
    assert "the last complete checkpoint is" in last_line
    checkpoint = Path(last_line.split("the last complete checkpoint is ")[1].split(" (")[0])
    loaded = load_policy(checkpoint)
    assert loaded.source == "lerobot_ros"


@pytest.mark.extended
def test_a_sigkilled_train_command_takes_torchrun_and_its_ranks_down(tiny_dataset: Path, tmp_path: Path) -> None:
    """`lerobot-ros train --nproc 2` SIGKILLed: torchrun gets its parent-death SIGTERM and stops both ranks.
    Before, torchrun (PPID 1) and the ranks trained on until their step limit."""
    from lerobot_ros.testing import pid_alive

    out = tmp_path / "run"
    args = train_args(tiny_dataset, out, "--steps", "100000", "--batch-size", "2", "--nproc", "2", "--save-every", "3")
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started: list[int] = []
    try:
        deadline = time.monotonic() + 300
        while not list((out / "checkpoints").glob("*/training_state/state.json")):  # both ranks train
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.2)
        torchrun = _children(process.pid)
        started = torchrun + [child for parent in torchrun for child in _children(parent)]
        assert len(started) == 3, started
        process.kill()
        process.wait()
        deadline = time.monotonic() + 120
        while alive := [pid for pid in started if pid_alive(pid)]:
            assert time.monotonic() < deadline, f"still training after `lerobot-ros train` was SIGKILLed: {alive}"
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in started:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str, str]]:
    """Two network namespaces joined by a veth pair (10.231.<n>.1 and .2); removed afterwards."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2 (CI runs as root)")
    tag = uuid.uuid4().hex[:6]
    a, b = f"lrt{tag}a", f"lrt{tag}b"
    subnet = 10 + int(tag, 16) % 200
    commands = [
        ["ip", "netns", "add", a], ["ip", "netns", "add", b],
        ["ip", "link", "add", f"v{tag}a", "type", "veth", "peer", "name", f"v{tag}b"],
        ["ip", "link", "set", f"v{tag}a", "netns", a], ["ip", "link", "set", f"v{tag}b", "netns", b],
        ["ip", "-n", a, "addr", "add", f"10.231.{subnet}.1/24", "dev", f"v{tag}a"],
        ["ip", "-n", b, "addr", "add", f"10.231.{subnet}.2/24", "dev", f"v{tag}b"],
        ["ip", "-n", a, "link", "set", f"v{tag}a", "up"], ["ip", "-n", b, "link", "set", f"v{tag}b", "up"],
        ["ip", "-n", a, "link", "set", "lo", "up"], ["ip", "-n", b, "link", "set", "lo", "up"],
    ]  # fmt: skip
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True)
        yield a, b, f"10.231.{subnet}.1"
    finally:
        for name in (a, b):
            subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


@pytest.mark.extended
def test_two_ranks_on_two_network_namespaces_train_together(
    tiny_dataset: Path, tmp_path: Path, two_hosts: tuple[str, str, str]
) -> None:
    host_a, host_b, master = two_hosts
    processes = []
    for rank, host in enumerate((host_a, host_b)):
        args = train_args(tiny_dataset, tmp_path / f"node{rank}", "--steps", "3", "--batch-size", "2")
        torchrun = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={rank}", "--nproc-per-node=1",
            f"--master-addr={master}", "--master-port=29531", "-m", *args[2:],
        ]  # fmt: skip
        env = {**os.environ, "GLOO_SOCKET_IFNAME": f"v{host[3:9]}{host[-1]}"}
        processes.append(
            subprocess.Popen(
                ["ip", "netns", "exec", host, *torchrun],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr[-3000:]
    assert load_policy(tmp_path / "node0" / "checkpoints" / "last" / "pretrained_model").source == "lerobot_ros"
    assert not (tmp_path / "node1" / "checkpoints").exists()  # only the global rank 0 writes
