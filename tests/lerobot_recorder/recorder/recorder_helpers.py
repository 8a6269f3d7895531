"""Helpers of the recorder's multi-process tests: start the synthetic publishers and the recorder node."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from lerobot_ros.testing import ManagedProcess, ProcessGroup, venv_script

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
CONTRACT = HERE / "small_contract.yaml"
REF_PYTHON = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", REPO_ROOT / ".venv-lerobot-ref")) / "bin" / "python"
LOADER = REPO_ROOT / "tests" / "lerobot_recorder" / "dataset" / "reference_loader.py"


def ros_args(params: dict[str, Any]) -> list[str]:
    out = ["--ros-args"]
    for key, value in params.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list):
            text = "[" + ",".join(f"'{v}'" for v in value) + "]"
        elif value == "":
            text = "''"
        else:
            text = str(value)
        out += ["-p", f"{key}:={text}"]
    return out


def start_streams(processes: ProcessGroup, name: str = "streams", **params: Any) -> ManagedProcess:
    """Joints at 100 Hz and two 320x240 cameras at 30 Hz (the small contract's topics)."""
    params.setdefault("contract", str(CONTRACT))
    return processes.start([venv_script("synthetic_streams"), *ros_args(params)], name=name)


def start_recorder(processes: ProcessGroup, root: Path, name: str = "recorder", **params: Any) -> ManagedProcess:
    """The recorder on the small contract, h264, quick episodes; `params` override."""
    defaults: dict[str, Any] = {
        "contract": str(CONTRACT),
        "root": str(root),
        "task": "pick the cube",
        "video_codec": "h264",
        "episode_time_s": 1.5,
        "reset_time_s": 0.3,
        "num_episodes": 1,
        "min_free_mb": 0.0,
        "startup_timeout_s": 20.0,
    }
    defaults.update(params)
    return processes.start([venv_script("recorder"), *ros_args(defaults)], name=name)


def status_watcher(node: Any) -> StatusWatcher:
    return StatusWatcher(node)


class Diagnostics:
    """The recorder's newest /diagnostics key/values."""

    def __init__(self, node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self.values: dict[str, str] = {}
        self._lock = threading.Lock()
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on, 10)

    def _on(self, msg: Any) -> None:
        for status in msg.status:
            if "lerobot_recorder" in status.name:
                with self._lock:
                    self.values = {kv.key: kv.value for kv in status.values}

    def count(self, reason: str) -> int:
        with self._lock:
            return int(self.values.get(f"rejected_stamps.{reason}", "0"))

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> dict[str, str]:
        """The first newest key/values for which `predicate(values)` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                values = dict(self.values)
            if values and predicate(values):
                return values
            time.sleep(0.05)
        raise AssertionError(f"no such recorder /diagnostics within {timeout} s; newest: {self.values}")


class StatusWatcher:
    """Keeps every RecorderStatus the recorder publishes."""

    def __init__(self, node: Any, topic: str = "/recorder/status") -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        from lerobot_msgs.msg import RecorderStatus

        self.messages: list[Any] = []
        self._since = 0
        self._lock = threading.Lock()
        qos = QoSProfile(depth=50, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(RecorderStatus, topic, self._on, qos)

    def _on(self, msg: Any) -> None:
        with self._lock:
            self.messages.append(msg)

    def mark(self) -> int:
        """Later waits look only at statuses published after this call."""
        with self._lock:
            self._since = len(self.messages)
        return self._since

    def wait_for(self, predicate: Any, timeout: float = 30.0, what: str = "status") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for msg in reversed(self.messages[self._since :]):
                    if predicate(msg):
                        return msg
            time.sleep(0.05)
        last = self.messages[-1] if self.messages else None
        seen = f"{last.state_name}: {last.message!r} ({last.num_episodes} saved)" if last else "nothing"
        raise AssertionError(f"no {what} within {timeout} s; last status: {seen}")

    def wait_state(self, state: str, timeout: float = 30.0, **fields: Any) -> Any:
        def ok(msg: Any) -> bool:
            return bool(msg.state_name == state and all(getattr(msg, k) == v for k, v in fields.items()))

        return self.wait_for(ok, timeout, f"state {state} {fields or ''}")


def reference_load(root: Path, tmp_path: Path) -> dict[str, np.ndarray]:
    """Every frame of `root` as LeRobot 0.4.4's LeRobotDataset gives it (reference venv)."""
    out = tmp_path / "reference.npz"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), HF_LEROBOT_HOME=str(tmp_path / "hf-lerobot"))
    run = subprocess.run(
        [str(REF_PYTHON), str(LOADER), str(root), str(out)], env=env, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-4000:]
    with np.load(out) as data:
        return {key: data[key] for key in data.files}


def wait_future(future: Any, timeout: float, what: str) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), f"{what} did not complete within {timeout} s"
    return future.result()


def record_one_episode(node: Any, task: str, duration_s: float) -> tuple[Any, list[Any]]:
    from lerobot_msgs.action import RecordEpisode
    from lerobot_ros.executors import ActionClient

    client = ActionClient(node, RecordEpisode, "/recorder/record_episode")
    assert client.wait_for_server(timeout_sec=30), "the record_episode action server did not appear"
    feedback: list[Any] = []
    goal = RecordEpisode.Goal(task=task, duration_s=duration_s)
    handle = wait_future(client.send_goal_async(goal, feedback_callback=feedback.append), 10, "goal")
    assert handle.accepted
    result = wait_future(handle.get_result_async(), 30, "the episode").result
    return result, feedback
