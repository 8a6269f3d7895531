"""Stage 1, `lerobot-ros demo record`: demonstrations in simulation, recorded through the real recorder path.

Runs launch/sim_record.launch.yaml (SO-101 sim bridge + scripted pick-and-place expert + recorder) with the
recorder waiting for controls, and drives it like an operator: each expert episode becomes one dataset episode
(a RecordEpisode goal when the expert starts, `next_episode` when it ends). Episodes already in the dataset
are kept: a second run records only the missing ones (with the next seeds) and appends them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lerobot_eval.demo.stack import LaunchedStack, installed_file, ros_node, spin_until
from lerobot_eval.demo.workspace import DemoLayout, DemoSettings, append_jsonl, read_jsonl, recorded_episodes
from lerobot_ros.command import CommandError

BOOKKEEPING = ("timestamp", "frame_index", "episode_index", "index", "task_index")


class Operator:
    """Turns expert episodes into recorder episodes (in this process, its own rclpy node)."""

    def __init__(self, node: Any, episodes: int, task: str, max_episode_s: float, seed: int) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger

        from lerobot_msgs.action import RecordEpisode
        from lerobot_ros.executors import ActionClient

        self.node = node
        self.episodes = episodes
        self.task = task
        self.max_episode_s = max_episode_s
        self.seed = seed
        self.results: list[dict[str, Any]] = []
        self.outcomes: list[str] = []
        self.failed: str | None = None
        self._lock = threading.Lock()
        self._goal_active = False
        self._started = 0
        self._expert_active = False
        self._episode_seed = seed
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
        started = bool(msg.data) and not self._expert_active
        self._expert_active = bool(msg.data)
        if started:
            # Expert episode i runs seed + i, whether or not it gets recorded: also when the recorder is still saving
            # the previous one (a busy machine), else every later episode's seed is off by one.
            self._started += 1
        if started and not self._goal_active and len(self.results) < self.episodes:
            if not self._action.server_is_ready():
                self.node.get_logger().warning("the recorder's action server is not up yet; skipping this episode")
                return
            self._goal_active = True
            self._episode_seed = self.seed + self._started - 1
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
        row = {
            "episode_index": int(result.episode_index),
            "seed": self._episode_seed,
            "saved": bool(result.saved),
            "frames": int(result.frames),
            "dropped": int(result.dropped),
            "message": str(result.message),
            "skew_max_s": {
                key[: -len(".skew_max_s")]: float(value)
                for key, value in diagnostics.items()
                if key.endswith(".skew_max_s")
            },
            "expert": self.outcomes[-1] if self.outcomes else "cut at max-episode-s",
        }
        self.results.append(row)  # the stage prints it
        self._goal_active = False


def record(layout: DemoLayout, settings: DemoSettings, say: Callable[[str], None], timeout_s: float) -> dict[str, Any]:
    """Record until the dataset holds `settings.episodes` episodes; returns the stage summary."""
    have = recorded_episodes(layout)
    missing = settings.episodes - have
    if missing <= 0:
        say(f"record: {layout.dataset} already holds {have} episodes (asked for {settings.episodes}); nothing to do")
    else:
        # An expert episode that started before the recorder was up is not in the dataset: continue after the
        # last seed used, not after the number of episodes.
        used = [int(row["seed"]) for row in read_jsonl(layout.record_log)]
        first_seed = max(used) + 1 if used else settings.seed
        say(
            f"record: {missing} expert episode(s) into {layout.dataset}"
            + (f" (resuming after the {have} already there)" if have else "")
            + f", seeds from {first_seed}; stack log {layout.root}/logs"
        )
        _record_more(layout, settings, first_seed, have, missing, say, timeout_s)
    return summarize_dataset(layout)


def _record_more(
    layout: DemoLayout,
    settings: DemoSettings,
    first_seed: int,
    have: int,
    missing: int,
    say: Callable[[str], None],
    timeout_s: float,
) -> None:
    arguments = {
        "root": str(layout.dataset),
        "task": settings.task,
        "num_episodes": str(missing),
        "video_codec": settings.codec,
        "seed": str(first_seed),
        "start_session": "false",
        "episode_time_s": str(settings.max_episode_s),
        "resume": "true" if have else "false",
        # One frame per simulation step, labelled with the expert's answer to exactly that observation, however
        # busy the machine: the bridge steps only once the expert answered (lockstep, at most real time) and
        # stamps simulated time, on which the recorder samples. In real time with wall stamps, a machine at load
        # 6-12 gave frames that repeat the same step (30-50 % of them), drop steps and carry the expert's answer
        # to an earlier observation -- demonstrations that depend on the load (README, "Demo results").
        "mode": "lockstep",
        "lockstep_real_time_factor": repr(float(settings.record_real_time_factor)),
        "use_sim_time": "true",
    }
    stack = LaunchedStack(
        installed_file("launch/sim_record.launch.yaml"), arguments, layout.root / "logs" / "record.log"
    )
    try:
        with ros_node("demo_operator") as node:
            operator = Operator(node, missing, settings.task, settings.max_episode_s, first_seed)
            saved = 0

            def progressed() -> bool:
                nonlocal saved
                while saved < len(operator.results):
                    row = operator.results[saved]
                    append_jsonl(layout.record_log, [row])
                    saved += 1
                    kept = "" if row["saved"] else f" NOT SAVED ({row['message']})"
                    say(
                        f"  episode {row['episode_index']} (seed {row['seed']}): {row['frames']} frames, "
                        f"{row['dropped']} dropped, expert {row['expert']}{kept}  [{have + saved}/{settings.episodes}]"
                    )
                return operator.done

            spin_until(node, progressed, stack, timeout_s, "recording")
            if operator.failed:
                raise CommandError(f"{operator.failed}; whatever was saved is in {layout.dataset}", exit_code=1)
    finally:
        stack.stop()


def summarize_dataset(layout: DemoLayout) -> dict[str, Any]:
    """Dataset path, size, features, per-feature statistics, drops and expert outcomes, and its validation."""
    from lerobot_dataset import DatasetReader
    from lerobot_dataset.validate import validate

    problems = validate(layout.dataset)
    reader = DatasetReader(layout.dataset)
    episodes = read_jsonl(layout.record_log)
    stats = reader.meta.stats or {}
    vectors = {
        key: {"names": spec.names, **{k: stats[key][k] for k in ("min", "max", "mean", "std")}}
        for key, spec in reader.features.items()
        if key not in BOOKKEEPING and spec.dtype in ("float32", "float64") and key in stats
    }
    skews: dict[str, float] = {}
    for row in episodes:
        for key, value in row.get("skew_max_s", {}).items():
            skews[key] = max(skews.get(key, 0.0), float(value))
    return {
        "dataset": str(layout.dataset),
        "episodes": reader.num_episodes,
        "frames": len(reader),
        "fps": reader.fps,
        "duration_s": len(reader) / reader.fps,
        "features": [k for k in reader.features if k not in BOOKKEEPING],
        "dropped": sum(int(r.get("dropped", 0)) for r in episodes),
        "expert_successes": sum(1 for r in episodes if r.get("expert") == "success"),
        "expert_episodes": len(episodes),
        "skew_max_s": skews,
        "stats": vectors,
        "valid": not problems,
        "problems": [str(p) for p in problems],
    }
