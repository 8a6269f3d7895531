"""Pytest harness for tests that run a real DDS graph of separate processes.

Load it with `pytest_plugins = ["lerobot_ros.testing"]`. Fixtures:

- `ros_domain`: a ROS_DOMAIN_ID leased for this test only (an flock'ed file per id, so parallel
  workers and concurrent test runs on one machine never share a graph), with LOCALHOST discovery
  and the stack's DDS profile set in `os.environ`.
- `ros_env`: the environment to start ROS subprocesses with, in that domain.
- `processes`: a `ProcessGroup`; everything it starts is stopped at teardown (SIGINT, then
  SIGTERM, then SIGKILL, to the whole process group), whatever the test did. A pytest run stopped by
  SIGTERM (CI) or SIGINT still tears its fixtures down (the plugin turns SIGTERM into KeyboardInterrupt) and
  starts no further test, even when the code under test caught that KeyboardInterrupt; an interrupted teardown
  SIGKILLs what it had not stopped yet (and the session's end whatever a skipped teardown left); each child
  gets SIGTERM from the kernel if pytest dies without teardown (SIGKILL: parent-death signal).
- `ros_node`: an rclpy node in its own context in the test's domain, spun by a background thread.

Helpers `wait_for_topic`, `wait_for_messages`, `wait_for_service`, `call_service` and
`wait_for_node` poll the graph with timeouts and fail with a message saying what was seen.

LeRobot's reference venv (.venv-lerobot-ref: LeRobot 0.6.1, scripts/setup.sh --with-lerobot-reference;
LEROBOT_ROS_REFERENCE_VENV names another, e.g. .venv-lerobot-044): `reference_python`, `reference_extras` (LeRobot
0.4.4's training packages), `reference_has`, `reference_env`, `run_in_reference_venv` and `lerobot_train`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pytest

from lerobot_ros.dds import clean_stale_shm, ros_environment
from lerobot_ros.parent_death import parent_death_signal

if TYPE_CHECKING:
    from rclpy.node import Node

REPO_ROOT = Path(__file__).resolve().parents[4]
MAX_DOMAIN_ID = 232
DOMAIN_LOCK_DIR = Path(tempfile.gettempdir()) / "lerobot_ros_domains"


class DomainLease:
    """Exclusive use of one ROS_DOMAIN_ID on this machine until `release()`."""

    def __init__(self, domain_id: int, lock_file: TextIO) -> None:
        self.domain_id = domain_id
        self._lock_file = lock_file

    def release(self) -> None:
        if not self._lock_file.closed:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()


def lease_domain(lock_dir: Path = DOMAIN_LOCK_DIR) -> DomainLease:
    """Lease a free domain id in 1..232, starting at a random one to avoid reusing a fresh graph."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    start = random.randrange(1, MAX_DOMAIN_ID + 1)
    for offset in range(MAX_DOMAIN_ID):
        domain_id = 1 + (start - 1 + offset) % MAX_DOMAIN_ID
        lock_file = open(lock_dir / f"{domain_id}.lock", "w")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            continue
        return DomainLease(domain_id, lock_file)
    raise RuntimeError(f"all ROS domain ids 1..{MAX_DOMAIN_ID} are leased (lock files in {lock_dir})")


def venv_script(name: str) -> str:
    """Path of a console script installed next to this interpreter (the project's venv)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; run scripts/setup.sh to install the project's scripts")
    return str(path)


def reference_venv() -> Path:
    """LeRobot's reference venv: $LEROBOT_ROS_REFERENCE_VENV, else .venv-lerobot-ref in the repository (LeRobot
    0.6.1; .venv-lerobot-044 holds 0.4.4)."""
    return Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", REPO_ROOT / ".venv-lerobot-ref"))


def reference_python() -> Path:
    return reference_venv() / "bin" / "python"


def reference_extras() -> Path:
    """LeRobot 0.4.4's training packages (requirements/lerobot-044-act-train.txt, installed `--no-deps --target`);
    LeRobot 0.6's reference venv has them installed, and no such folder."""
    return Path(os.environ.get("LEROBOT_ROS_ACT_EXTRAS", reference_venv() / "act-extras"))


def reference_has(package: str) -> bool:
    """Whether the reference venv has the top-level package `package` (in its site-packages or its extras)."""
    if not reference_python().exists():
        return False
    places = [reference_extras(), *reference_venv().glob("lib/python3.*/site-packages")]
    return any((place / package).is_dir() or (place / f"{package}.py").is_file() for place in places)


def reference_lerobot_version() -> tuple[int, ...]:
    """The reference venv's LeRobot release, e.g. (0, 6, 1), from its distribution metadata; () without one."""
    for info in reference_venv().glob("lib/python3.*/site-packages/lerobot-*.dist-info"):
        return tuple(
            int(part) for part in info.name.removesuffix(".dist-info").split("-")[1].split(".") if part.isdigit()
        )
    return ()


def reference_env(workdir: Path | None) -> dict[str, str]:
    """The environment of a reference-venv process: the training extras on PYTHONPATH, offline, one thread;
    with `workdir`, the Hugging Face caches under it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(reference_extras()), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               WANDB_MODE="disabled", OMP_NUM_THREADS="1")  # fmt: skip
    if workdir is not None:
        env.update(HF_HOME=str(workdir / "hf-home"), HF_LEROBOT_HOME=str(workdir / "hf-lerobot"))
    return env


def run_in_reference_venv(workdir: Path, args: Sequence[str], timeout: float = 900) -> None:
    """`python ARGS` in the reference venv (`reference_env(workdir)`); fails the test with its output if it fails."""
    result = subprocess.run(
        [str(reference_python()), *args], env=reference_env(workdir), capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"{list(args[:3])} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def lerobot_train(workdir: Path, dataset: Path, repo_id: str, policy_args: Sequence[str]) -> Path:
    """Train 2 steps (CPU) with LeRobot's own lerobot-train; returns its last pretrained_model directory. No
    environment is given, so no evaluation runs (0.4.4's `--eval_freq` is 0.6's `--env_eval_freq`: neither passed)."""
    out = workdir / "lerobot-run"
    run_in_reference_venv(
        workdir,
        [
            "-m", "lerobot.scripts.lerobot_train", *policy_args, "--policy.device=cpu", "--policy.push_to_hub=false",
            f"--dataset.repo_id={repo_id}", f"--dataset.root={dataset}", f"--output_dir={out}", "--steps=2",
            "--batch_size=2", "--seed=1000", "--num_workers=0", "--save_freq=2", "--wandb.enable=false",
        ],
    )  # fmt: skip
    return out / "checkpoints" / "last" / "pretrained_model"


def write_hub_cache(cache: Path, repo_id: str, folder: Path, commit: str, repo_type: str = "dataset") -> Path:
    """`folder` laid out in `cache` as huggingface_hub's snapshot_download leaves a repo in HF_HUB_CACHE (blobs
    linked from `snapshots/<commit>`, `refs/main`); returns the snapshot folder. With HF_HUB_CACHE=cache and
    HF_HUB_OFFLINE=1 a command finds `repo_id` there without any network call."""
    import shutil

    repo = cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    for index, path in enumerate(sorted(folder.rglob("*"))):
        if path.is_file() and ".lerobot_ros_staging" not in path.parts:
            blob = repo / "blobs" / f"{index:040x}"
            blob.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, blob)
            link = snapshot / path.relative_to(folder)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return snapshot


class LogLines:
    """A stand-in for a node's logger in tests of pure cores: keeps every (level, message) it is given."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, message: str, /) -> None:
        self.lines.append(("info", message))

    def warning(self, message: str, /) -> None:
        self.lines.append(("warning", message))

    def error(self, message: str, /) -> None:
        self.lines.append(("error", message))

    def text(self, level: str) -> str:
        """Every message of `level`, one a line."""
        return "\n".join(m for lv, m in self.lines if lv == level)


class ManagedProcess:
    """A child process in its own process group whose output is collected line by line."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, log_dir: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._new_output = threading.Condition(self._lock)
        self.popen = subprocess.Popen(
            self.argv,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
            # SIGTERM, not SIGKILL: nodes and launchers stop their own children on it.
            preexec_fn=parent_death_signal(signal.SIGTERM),  # noqa: PLW1509 - one prctl call in the child
        )
        self._reader = threading.Thread(target=self._read_output, name=f"output-{name}", daemon=True)
        self._reader.start()

    def _read_output(self) -> None:
        assert self.popen.stdout is not None
        with open(self.log_path, "w") as log:
            for line in self.popen.stdout:
                log.write(line)
                log.flush()
                with self._new_output:
                    self._lines.append(line.rstrip("\n"))
                    self._new_output.notify_all()
        with self._new_output:
            self._new_output.notify_all()

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def output(self) -> str:
        with self._lock:
            return "\n".join(self._lines)

    def wait_for_output(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """Wait until a line of output matches `pattern`; fail if the process exits first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._new_output:
            while True:
                for line in self._lines[seen:]:
                    match = regex.search(line)
                    if match:
                        return match
                seen = len(self._lines)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.popen.poll() is not None and not self._reader.is_alive()):
                    break
                self._new_output.wait(min(remaining, 0.2))
        state = "still running" if self.popen.poll() is None else f"exited with {self.popen.returncode}"
        raise AssertionError(
            f"{self.name}: no output line matched {pattern!r} within {timeout} s ({state}); output:\n{self.output()}"
        )

    def send_signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        code = self.popen.wait(timeout)
        self._reader.join(timeout=5)
        return code

    def stop(self, sigint_timeout: float = 5.0, sigterm_timeout: float = 3.0) -> int:
        """Stop the whole process group: SIGINT, then SIGTERM, then SIGKILL."""
        for sig, timeout in ((signal.SIGINT, sigint_timeout), (signal.SIGTERM, sigterm_timeout), (signal.SIGKILL, 5.0)):
            if self.popen.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        # Grandchildren may outlive the leader; the group must be empty afterwards.
        return self.kill()

    def kill(self) -> int:
        """SIGKILL the whole process group now."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self._reader.join(timeout=5)
        return self.popen.wait()


class ProcessGroup:
    """Starts processes for one test and guarantees they are all gone afterwards."""

    def __init__(self, env: Mapping[str, str], log_dir: Path) -> None:
        self.env = dict(env)
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._processes: list[ManagedProcess] = []

    def start(
        self, argv: Sequence[str], name: str | None = None, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> ManagedProcess:
        name = name or f"{Path(argv[0]).name}-{len(self._processes)}"
        process = ManagedProcess(name, argv, self.env if env is None else env, cwd, self.log_dir)
        self._processes.append(process)
        return process

    def stop_all(self) -> None:
        """Stop every process, newest first. Interrupted (Ctrl-C, the run's SIGTERM), it SIGKILLs the processes
        not yet stopped before the KeyboardInterrupt goes on: none may outlive an interrupted teardown."""
        pending = list(reversed(self._processes))
        try:
            while pending:
                pending[0].stop()
                pending.pop(0)
        except KeyboardInterrupt:
            for process in pending:
                process.kill()
            raise

    def kill_all(self) -> None:
        for process in self._processes:
            process.kill()

    def __iter__(self) -> Iterator[ManagedProcess]:
        return iter(self._processes)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _poll(condition: Callable[[], Any], timeout: float, describe: Callable[[], str], interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(describe())
        time.sleep(interval)


def wait_for_topic(node: Node, name: str, timeout: float = 20.0) -> list[str]:
    """Wait until `name` is in the graph; returns its type names."""

    def find() -> list[str] | None:
        for topic, types in node.get_topic_names_and_types():
            if topic == name:
                return list(types)
        return None

    return list(
        _poll(
            find,
            timeout,
            lambda: (
                f"topic {name} not seen within {timeout} s; topics: {sorted(dict(node.get_topic_names_and_types()))}"
            ),
        )
    )


def wait_for_node(node: Node, fully_qualified_name: str, timeout: float = 20.0) -> None:
    def names() -> list[str]:
        return [f"{ns.rstrip('/')}/{n}" for n, ns in node.get_node_names_and_namespaces()]

    _poll(
        lambda: fully_qualified_name in names(),
        timeout,
        lambda: f"node {fully_qualified_name} not seen within {timeout} s; nodes: {sorted(names())}",
    )


def wait_for_messages(
    node: Node, msg_type: Any, topic: str, count: int = 1, timeout: float = 20.0, qos: Any = 10
) -> list[Any]:
    """Subscribe to `topic` and return the first `count` messages received."""
    received: list[Any] = []
    done = threading.Event()

    def on_message(msg: Any) -> None:
        if len(received) < count:
            received.append(msg)
            if len(received) >= count:
                done.set()

    subscription = node.create_subscription(msg_type, topic, on_message, qos)
    try:
        if not done.wait(timeout):
            raise AssertionError(f"received {len(received)}/{count} messages on {topic} within {timeout} s")
    finally:
        node.destroy_subscription(subscription)
    return received


def wait_for_service(node: Node, srv_type: Any, name: str, timeout: float = 20.0) -> Any:
    """Wait for a service server; returns a ready client."""
    client = node.create_client(srv_type, name)
    if not client.wait_for_service(timeout_sec=timeout):
        node.destroy_client(client)
        raise AssertionError(f"service {name} not available within {timeout} s")
    return client


def call_service(node: Node, srv_type: Any, name: str, request: Any, timeout: float = 20.0) -> Any:
    client = wait_for_service(node, srv_type, name, timeout)
    try:
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout):
            raise AssertionError(f"service {name} did not answer within {timeout} s")
        return future.result()
    finally:
        node.destroy_client(client)


class _TerminateAsInterrupt:
    """SIGTERM handler: the first one raises KeyboardInterrupt, as SIGINT does, so pytest ends the run and tears
    down every fixture (the `processes` of the running test stop their process groups); later ones are ignored
    so that the teardown itself is not interrupted (SIGKILL still ends the run at once). Code under test may
    catch that KeyboardInterrupt (`lerobot_ros.cli.main` run in-process returns 130 on it): `received` then
    still ends the run before the next test starts (`pytest_runtest_setup`)."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.received:
            return
        self.received = True
        raise KeyboardInterrupt("SIGTERM: stopping the test run; fixtures tear down")


_PREVIOUS_SIGTERM = pytest.StashKey[Any]()
_SIGTERM_HANDLER = pytest.StashKey[_TerminateAsInterrupt]()
# The `processes` groups whose teardown has not finished: an interrupt between two fixtures' teardowns can make
# pytest skip the rest of a test's teardown, so the session's end SIGKILLs what is left in them.
_UNSTOPPED_GROUPS = pytest.StashKey[list[ProcessGroup]]()


def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        handler = _TerminateAsInterrupt()
        config.stash[_SIGTERM_HANDLER] = handler
        config.stash[_PREVIOUS_SIGTERM] = signal.signal(signal.SIGTERM, handler)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    handler = item.config.stash.get(_SIGTERM_HANDLER, None)
    if handler is not None and handler.received:
        pytest.exit("SIGTERM received: the run stops (its KeyboardInterrupt was caught by the code under test)",
                    returncode=pytest.ExitCode.INTERRUPTED)  # fmt: skip


def pytest_unconfigure(config: pytest.Config) -> None:
    previous = config.stash.get(_PREVIOUS_SIGTERM, None)
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)
        del config.stash[_PREVIOUS_SIGTERM]
        del config.stash[_SIGTERM_HANDLER]


def pytest_sessionstart(session: pytest.Session) -> None:
    clean_stale_shm()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    for group in session.config.stash.get(_UNSTOPPED_GROUPS, []):
        group.kill_all()


@pytest.fixture
def ros_domain(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    lease = lease_domain()
    try:
        for key, value in ros_environment().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.delenv("ROS_STATIC_PEERS", raising=False)
        yield lease.domain_id
    finally:
        lease.release()


@pytest.fixture
def ros_env(ros_domain: int) -> dict[str, str]:
    return ros_environment()


@pytest.fixture
def sim_env(ros_env: dict[str, str]) -> dict[str, str]:
    """Environment for simulation subprocesses (sim bridge, expert, demo): the test's ROS domain, headless EGL."""
    env = dict(ros_env)
    env["MUJOCO_GL"] = "egl"
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def processes(request: pytest.FixtureRequest, ros_env: dict[str, str], tmp_path: Path) -> Iterator[ProcessGroup]:
    group = ProcessGroup(ros_env, tmp_path / "process_logs")
    unstopped = request.config.stash.setdefault(_UNSTOPPED_GROUPS, [])
    unstopped.append(group)
    try:
        yield group
    finally:
        group.stop_all()
        unstopped.remove(group)


@pytest.fixture
def ros_node(ros_domain: int) -> Iterator[Node]:
    import rclpy

    from lerobot_ros.executors import SingleThreadedExecutor

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain)
    node = rclpy.create_node(f"test_probe_{os.getpid()}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, name="ros_node-spin", daemon=True)
    spinner.start()
    try:
        yield node
    finally:
        # Stop spinning before anything the executor waits on is destroyed.
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5)
        node.destroy_node()
        context.try_shutdown()
