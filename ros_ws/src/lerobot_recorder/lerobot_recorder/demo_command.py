"""`lerobot-ros demo record`: demonstrations in simulation, recorded through the real recorder path.

Runs launch/sim_record.launch.yaml (SO-101 sim bridge + scripted pick-and-place expert + recorder) with the
recorder waiting for controls, and drives it like an operator would: each expert episode becomes one dataset
episode (a RecordEpisode goal when the expert starts, `next_episode` when it ends). At the end it stops the
stack, prints the dataset path and a summary (episodes, frames, dropped frames, per-feature skew, expert
outcomes) and validates the dataset.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lerobot_ros.command import Command, CommandError

DEFAULT_TASK = "pick up the cube and place it in the bin"
BOOKKEEPING = ("timestamp", "frame_index", "episode_index", "index", "task_index")


def _find_launch_file() -> Path:
    """launch/sim_record.launch.yaml of the checkout (the current directory's, else this package's repo)."""
    candidates = [Path.cwd() / "launch" / "sim_record.launch.yaml"]
    candidates += [parent / "launch" / "sim_record.launch.yaml" for parent in Path(__file__).resolve().parents]
    for path in candidates:
        if path.is_file():
            return path
    raise CommandError("launch/sim_record.launch.yaml not found; run from the repository root or pass --launch-file")


def _add_demo(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    record = verbs.add_parser("record", help="record sim demonstrations into a dataset", description=__doc__)
    record.add_argument("--root", type=Path, default=None, help="dataset folder (default: a new folder in /tmp)")
    record.add_argument("--episodes", type=int, default=3, help="episodes to record (default 3)")
    record.add_argument("--task", default=DEFAULT_TASK, help="task text")
    record.add_argument("--max-episode-s", type=float, default=40.0, help="cut an expert episode after this long")
    record.add_argument("--codec", choices=("h264", "libsvtav1"), default="h264", help="video codec (default h264)")
    record.add_argument("--seed", type=int, default=0, help="seed of the first sim episode")
    record.add_argument("--launch-file", type=Path, default=None, help="the sim record launch file")
    record.add_argument("--timeout", type=float, default=600.0, help="give up after this long (s)")


class _Operator:
    """Turns expert episodes into recorder episodes (in the demo process, its own rclpy context)."""

    def __init__(self, node: Any, episodes: int, task: str, max_episode_s: float) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.action import ActionClient
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger

        from lerobot_msgs.action import RecordEpisode

        self.node = node
        self.episodes = episodes
        self.task = task
        self.max_episode_s = max_episode_s
        self.results: list[dict[str, Any]] = []
        self.outcomes: list[str] = []
        self.failed: str | None = None
        self._lock = threading.Lock()
        self._goal_active = False
        self._diagnostics: dict[str, str] = {}
        self._action = ActionClient(node, RecordEpisode, "/recorder/record_episode")
        self._goal_type = RecordEpisode.Goal
        self._next = node.create_client(Trigger, "/recorder/next_episode")
        self._trigger = Trigger.Request
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        node.create_subscription(Bool, "/follower/scripted_expert/episode_active", self._on_active, latched)
        node.create_subscription(String, "/follower/sim/episode_end", self._on_end, 10)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 20)

    @property
    def done(self) -> bool:
        return len(self.results) >= self.episodes or self.failed is not None

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith("lerobot_recorder"):
                with self._lock:
                    self._diagnostics = {kv.key: kv.value for kv in status.values}

    def _on_end(self, msg: Any) -> None:
        if self._goal_active:
            self.outcomes.append(str(msg.data))

    def _on_active(self, msg: Any) -> None:
        if msg.data and not self._goal_active and len(self.results) < self.episodes:
            if not self._action.server_is_ready():
                self.node.get_logger().warning("the recorder's action server is not up yet; skipping this episode")
                return
            self._goal_active = True
            goal = self._goal_type(task=self.task, duration_s=self.max_episode_s)
            self._action.send_goal_async(goal).add_done_callback(self._on_goal)
        elif not msg.data and self._goal_active and self._next.service_is_ready():
            self._next.call_async(self._trigger())

    def _on_goal(self, future: Any) -> None:
        handle = future.result()
        if not handle.accepted:
            self.failed = "the recorder rejected the episode goal"
            return
        handle.get_result_async().add_done_callback(self._on_result)

    def _on_result(self, future: Any) -> None:
        result = future.result().result
        # The recorder's last diagnostics (1 Hz) still describe this episode: its report lives until the next.
        with self._lock:
            diagnostics = dict(self._diagnostics)
        self.results.append(
            {
                "saved": result.saved,
                "episode_index": result.episode_index,
                "frames": result.frames,
                "dropped": result.dropped,
                "message": result.message,
                "skew_max_s": {
                    key[: -len(".skew_max_s")]: float(value)
                    for key, value in diagnostics.items()
                    if key.endswith(".skew_max_s")
                },
                "expert": self.outcomes[-1] if self.outcomes else "cut at max-episode-s",
            }
        )
        self.node.get_logger().info(
            f"episode {result.episode_index}: {'saved' if result.saved else 'not saved'}, {result.frames} frames, "
            f"{result.dropped} dropped ({self.results[-1]['expert']})"
        )
        self._goal_active = False


def _run_demo(args: argparse.Namespace) -> int:
    import rclpy

    from lerobot_recorder.dataset import DatasetReader
    from lerobot_recorder.dataset.validate import validate
    from lerobot_ros.dds import apply_ros_environment, ros_environment

    if args.episodes < 1:
        raise CommandError("--episodes must be >= 1")
    launch_file = args.launch_file or _find_launch_file()
    root = args.root or Path("/tmp/lerobot_ros_demo") / time.strftime("sim-%Y%m%d-%H%M%S")
    if root.exists():
        raise CommandError(f"{root} exists; pass a new --root")
    env = ros_environment(dict(os.environ))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lerobot_ros.cli",
            "launch",
            str(launch_file),
            f"root:={root}",
            f"task:={args.task}",
            f"num_episodes:={args.episodes}",
            f"video_codec:={args.codec}",
            f"seed:={args.seed}",
            "start_session:=false",
            f"episode_time_s:={args.max_episode_s}",
        ],
        env=env,
        start_new_session=True,
    )
    for key in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID"):
        if key in env:
            os.environ[key] = env[key]
    apply_ros_environment()
    rclpy.init()
    node = rclpy.create_node("demo_operator")
    operator = _Operator(node, args.episodes, args.task, args.max_episode_s)
    start = time.monotonic()
    try:
        while not operator.done and launcher.poll() is None:
            rclpy.spin_once(node, timeout_sec=0.1)
            if time.monotonic() - start > args.timeout:
                operator.failed = f"the demo did not finish within {args.timeout:g} s"
    finally:
        node.destroy_node()
        rclpy.shutdown()
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGINT)
            try:
                launcher.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.pid, signal.SIGKILL)
                launcher.wait()
    if operator.failed:
        raise CommandError(f"{operator.failed}; whatever was saved is in {root}", exit_code=1)
    if not operator.done:
        raise CommandError(f"the sim stack exited early (status {launcher.returncode}); see its output above", 1)
    problems = validate(root)
    reader = DatasetReader(root)
    summary = {
        "dataset": str(root),
        "episodes": reader.num_episodes,
        "frames": len(reader),
        "fps": reader.fps,
        "features": [k for k in reader.features if k not in BOOKKEEPING],
        "dropped": sum(r["dropped"] for r in operator.results),
        "per_episode": operator.results,
        "valid": not problems,
    }
    print(json.dumps(summary, indent=2))
    if problems:
        for problem in problems:
            print(f"invalid: {problem}")
        return 1
    print(f"OK: {root} is a valid LeRobot v3.0 dataset with {reader.num_episodes} episodes, {len(reader)} frames")
    return 0


DEMO = Command(
    name="demo",
    help="demos: `demo record` records sim demonstrations through the recorder",
    add_arguments=_add_demo,
    run=_run_demo,
    description="Demonstrations of the stack (demo record: sim bridge + scripted expert + recorder -> dataset).",
)
