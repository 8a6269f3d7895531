"""Fuzz target of the live recorder's session with sensors that stop, restart or flood (`RecorderDeadSensors`).

`lerobot_recorder.recorder.session.RecordingSession` is pure (no rclpy): the recorder node hands it raw CDR
messages and its clock. Here a fake node does the same with a clock moved by hand (40 ms steps), a joint-state
and a camera topic at 25 Hz, and a real dataset in the worker's directory. Each input is a session of two
0.4 s episodes (10 fps, topic_timeout_s 0.3, topic_wait_s 1.0, shutdown_when_done) whose sensors, at random
points, stop for a while, stop for good, restart delivering their backlog, or flood (many messages per step,
or duplicates). The judge: the session ends (a session that never ends trips the harness's watchdog: a hang);
it ends stopped with every episode saved, or in error with a one-line reason naming a topic that really went
silent; every saved episode holds the frames its log line says, each frame's values are ones the sensors
published (nothing from another time or episode); `silent` names a topic only after it really sent nothing for
topic_timeout_s, and names it once it did.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
from fuzz_harness import DataLost
from fuzz_targets import rng_for

from lerobot_contract.time import NS
from lerobot_ros.testing import LogLines

FPS = 10
STEP_NS = NS // 25
START_NS = 1_000 * NS
EPISODE_S = 0.4
EPISODES = 2
TIMEOUT_S = 0.3
WAIT_S = 1.0
TOPICS = ("/j", "/c")
DURATIONS_S = (0.05, 0.2, 0.35, 0.8, 1.5, 3.0)


SHM = Path("/dev/shm")


def remove_stale_session_dirs() -> None:
    """Remove the session folders of processes that are gone (a worker killed by the harness leaves its own)."""
    for old in SHM.glob("fuzz-recorder-*"):
        pid = old.name.rpartition("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)


def session_dir(workdir: Path) -> Path:
    """Where the sessions' datasets go: a folder of this process in /dev/shm (memory: the dataset's fsyncs cost
    nothing, so a save is not a wait on a loaded disk), removed at exit; folders of processes that are gone are
    removed first (test_fuzz also removes them after each run: the harness kills its last worker). `workdir`
    where there is no /dev/shm."""
    if not (SHM.is_dir() and os.access(SHM, os.W_OK)):
        return workdir
    remove_stale_session_dirs()
    path = SHM / f"fuzz-recorder-{os.getpid()}"
    path.mkdir(exist_ok=True)
    atexit.register(shutil.rmtree, path, True)
    return path


Fault = tuple[str, int, int, int]  # kind, start ns, end ns, messages per step (restamped: seconds off + 10)


class SessionEnded(Exception):
    """The session stopped in the error state with a one-line reason naming a topic that went silent."""


class RecorderDeadSensors:
    """Sessions whose sensors stop, restart or flood, through RecordingSession with a fake clock."""

    name = "recorder_dead_sensors"

    def __init__(self) -> None:
        self.clear_errors: tuple[type[BaseException], ...] = (SessionEnded,)
        self.last_extra: dict[str, int] | None = None
        self.work = Path()

    def setup(self, workdir: Path) -> None:
        from lerobot_contract import Contract
        from lerobot_recorder.recorder.messages import build_typestore

        self.work = session_dir(workdir)
        self.contract = Contract.from_dict({"robot_type": "fuzz", "fps": FPS, "features": {
            "observation.state": {"topic": "/j", "type": "sensor_msgs/msg/JointState", "field": "position",
                                  "joints": ["a", "b"], "names": ["a.pos", "b.pos"]},
            "observation.images.cam": {"topic": "/c", "type": "sensor_msgs/msg/Image", "shape": [8, 8, 3],
                                       "dtype": "image"}}})  # fmt: skip
        self.ts = build_typestore(["sensor_msgs/msg/JointState", "sensor_msgs/msg/Image"])

    def header(self, stamp_ns: int) -> Any:
        time = self.ts.types["builtin_interfaces/msg/Time"](sec=stamp_ns // NS, nanosec=stamp_ns % NS)
        return self.ts.types["std_msgs/msg/Header"](stamp=time, frame_id="")

    @staticmethod
    def joint_value(stamp_ns: int) -> float:
        return (stamp_ns - START_NS) / NS

    @staticmethod
    def pixel_value(stamp_ns: int) -> int:
        return int((stamp_ns - START_NS) // (NS // 1000)) % 251

    def message(self, topic: str, stamp_ns: int) -> bytes:
        """The CDR of `topic`'s message stamped `stamp_ns`, whose values say the stamp."""
        if topic == "/j":
            value = self.joint_value(stamp_ns)
            msg: Any = self.ts.types["sensor_msgs/msg/JointState"](
                header=self.header(stamp_ns), name=["a", "b"], position=np.array([value, -value]),
                velocity=np.zeros(0), effort=np.zeros(0))  # fmt: skip
        else:
            msg = self.ts.types["sensor_msgs/msg/Image"](
                header=self.header(stamp_ns), height=8, width=8, encoding="rgb8", is_bigendian=0, step=24,
                data=np.full(8 * 8 * 3, self.pixel_value(stamp_ns), np.uint8))  # fmt: skip
        return bytes(self.ts.serialize_cdr(msg, msg.__msgtype__))

    def schedule(self, rng: np.random.Generator) -> dict[str, list[Fault]]:
        """Per topic, its faults: (kind, start ns, end ns, messages per step) from the session's start."""
        plan: dict[str, list[Fault]] = {}
        for topic in TOPICS:
            faults = []
            for _ in range(int(rng.integers(0, 3))):
                kind = str(rng.choice(["stop", "gone", "restart", "flood", "duplicates", "restamped"]))
                start = START_NS + int(rng.integers(0, 36)) * STEP_NS
                end = start + round(float(rng.choice(DURATIONS_S)) * NS) if kind != "gone" else 2**62
                faults.append((kind, start, end, int(rng.integers(2, 20))))
            plan[topic] = faults
        return plan

    def deliveries(self, faults: list[Fault], now: int) -> list[int]:
        """The stamps a topic delivers in the step ending at `now`."""
        for kind, start, end, per_step in faults:
            if not start <= now < end:
                if kind == "restart" and end <= now < end + STEP_NS:  # back: the backlog first, then now
                    return [*range(start, end, STEP_NS), now]
                continue
            if kind in ("stop", "gone", "restart"):
                return []
            if kind == "restamped":  # a driver restarted on another clock: stamps per_step seconds off, either way
                return [now + (per_step - 10) * NS]
            if kind == "flood":
                return [now - STEP_NS + (j + 1) * STEP_NS // per_step for j in range(per_step)]
            return [now] * per_step
        return [now]

    def run(self, seed: int, index: int) -> str:
        from lerobot_recorder.recorder.session import (
            RecordingSession,  # fmt: skip
            SamplingOptions,
            SessionHooks,
            SessionOptions,
            header_topics,
            open_dataset,
        )
        from lerobot_recorder.recorder.workflow import State, WorkflowConfig

        rng = rng_for(seed, index)
        plan = self.schedule(rng)
        reset_s = float(rng.choice([0.0, 0.1]))
        described = f"reset {reset_s} s; " + "; ".join(
            f"{topic}: {kind} {(a - START_NS) / NS:.2f}..{min(b - START_NS, 99 * NS) / NS:.2f} s x{n}"
            for topic, faults in plan.items() for kind, a, b, n in faults
        ) if any(plan.values()) else f"reset {reset_s} s; no faults"  # fmt: skip
        root = self.work / "ds"
        if root.exists():
            shutil.rmtree(root)
        clock = {"now": START_NS}
        log = LogLines()
        starts: dict[int, int] = {}  # episode index -> its start (a re-recorded episode: the last one)

        def marker(status: Any, start: int) -> None:
            starts[status.episode_index] = start

        hooks = SessionHooks(now_ns=lambda: clock["now"], log=log, publish_status=lambda: None, publish_marker=marker)
        session = RecordingSession(SessionOptions(root=root, shutdown_when_done=True), hooks, task="fuzz")
        writer = open_dataset(root, self.contract, FPS, video=False, codec="h264-ultrafast", resume=False, repo_id="")
        session.configure(
            self.contract,
            writer,
            WorkflowConfig(episode_time_s=EPISODE_S, reset_time_s=reset_s, num_episodes=EPISODES, topic_wait_s=WAIT_S),
            SamplingOptions(fps=FPS, topic_timeout_s=TIMEOUT_S),
            self.ts,
            header_topics(self.contract, self.ts),
        )
        session.activate(start_session=True)
        last_fresh = dict.fromkeys(TOPICS, START_NS)
        named_silent: set[str] = set()
        published: dict[str, set[int]] = {topic: set() for topic in TOPICS}
        pause = threading.Event()
        try:
            while session.exit_code is None:  # a session that never ends is the watchdog's hang
                clock["now"] += STEP_NS
                now = clock["now"]
                for topic in TOPICS:
                    for stamp in self.deliveries(plan[topic], now):
                        published[topic].add(stamp)
                        session.on_message(topic, self.message(topic, stamp))
                        if now - stamp < STEP_NS:
                            last_fresh[topic] = now
                session.tick()
                self.check_silence(session, last_fresh, now, plan, described)
                named_silent |= session.silent
                while session.workflow is not None and session.workflow.state is State.SAVING:
                    pause.wait(0.001)  # a save takes no time on the robot's clock: the dataset thread finishes it
        finally:
            status = session.status()
            session.release()
        self.last_extra = {
            "episodes_saved": session.num_saved,
            "sessions_ended_in_error": int(session.exit_code == 1),
            "topics_reported_silent": len(named_silent),
            "ended_after_empty_episodes": 0,
        }
        self.judge(root, log, session.num_saved, published, starts, described)
        self.check_counts(log, plan, starts, described)
        if session.exit_code == 1:
            message = status.message
            if status.state is not State.ERROR or not message.strip() or "\n" in message:
                raise DataLost(f"exit code 1 in state {status.state} with message {message!r} after {described}")
            keys = {"/j": "observation.state", "/c": "observation.images.cam"}
            named = [t for t in TOPICS if message.startswith(f"{t} (") or f"first message on {keys[t]}" in message]
            restamped = any(f[0] == "restamped" for faults in plan.values() for f in faults)
            if restamped and "episodes in a row had no frames" in message:
                self.last_extra["ended_after_empty_episodes"] = 1
                raise SessionEnded(f"{message} ({session.num_saved} saved)")
            if not named or not (restamped or any(f[0] in ("stop", "gone", "restart") for f in plan[named[0]])):
                raise DataLost(f"the session stopped naming a topic that never went silent: {message}; {described}")
            raise SessionEnded(f"{message} ({session.num_saved} saved)")
        if session.num_saved != EPISODES:
            raise DataLost(f"the session ended (exit 0) with {session.num_saved} of {EPISODES} saved: {described}")
        return described

    @staticmethod
    def check_counts(log: LogLines, plan: dict[str, list[Fault]], starts: dict[int, int], described: str) -> None:
        """An episode no fault came near holds all its frames with none dropped; no episode counts more frames
        (kept + dropped) than its time holds."""
        import re

        full = round(EPISODE_S * FPS)
        claimed: int | None = None  # an episode the log said was saved, until its "saved episode" line
        for _, line in log.lines:
            if claimed is not None and (line.startswith("recording episode") or line.startswith("recording stopped")):
                raise DataLost(f"the log said episode {claimed} was saved, it was not: {line}; {described}")
            if m := re.search(r"episode (\d+) ended early and saved", line):
                claimed = int(m[1])
            elif claimed is not None and line.startswith(f"saved episode {claimed}:"):
                claimed = None
        for lv, line in log.lines:
            if lv != "info" or not (m := re.match(r"saved episode (\d+): (\d+) frames, (\d+) dropped", line)):
                continue
            index, frames, dropped = (int(g) for g in m.groups())
            if frames + dropped > full + 1:
                raise DataLost(f"episode {index}: {frames} frames + {dropped} dropped in {EPISODE_S} s; {described}")
            start = starts[index]
            before, after = start - round((TIMEOUT_S + 0.2) * NS), start + round((EPISODE_S + 0.2) * NS)
            near = [f for faults in plan.values() for f in faults if f[1] < after and f[2] > before]
            if not near and (frames, dropped) != (full, 0):
                raise DataLost(f"episode {index}: {frames} frames, {dropped} dropped, no fault near it; {described}")

    @staticmethod
    def check_silence(
        session: Any, last_fresh: dict[str, int], now: int, plan: dict[str, list[Fault]], described: str
    ) -> None:
        """`silent` names a topic only once it sent nothing fresh for topic_timeout_s, and names it then. (Once a
        topic's stamps moved to another clock, which samples are usable is the sampler's clock rule, for every
        topic: the clock is shared; from then on silence is not judged here.)"""
        timeout = round(TIMEOUT_S * NS)
        if any(f[0] == "restamped" and f[1] <= now for faults in plan.values() for f in faults):
            return
        for topic in TOPICS:
            quiet = now - last_fresh[topic]
            if topic in session.silent and quiet < timeout - STEP_NS:
                raise DataLost(f"{topic} called silent {quiet / NS:.2f} s after its last message; {described}")
            if topic not in session.silent and quiet > timeout + STEP_NS:
                raise DataLost(f"{topic} not called silent after {quiet / NS:.2f} s without a message; {described}")

    def judge(
        self,
        root: Path,
        log: LogLines,
        num_saved: int,
        published: dict[str, set[int]],
        starts: dict[int, int],
        described: str,
    ) -> None:
        """Every saved episode is in the dataset with the frames its log line says, each holding values published
        during that episode (states say their stamp, images their stamp's pixel value; states in time order):
        nothing of another episode, nothing changed after its save."""
        import re

        from lerobot_dataset import DatasetReader

        said = [(int(m[1]), int(m[2])) for lv, line in log.lines
                if lv == "info" and (m := re.match(r"saved episode (\d+): (\d+) frames", line))]  # fmt: skip
        if not root.exists():  # a session that saved nothing leaves no dataset (never one validate refuses)
            if num_saved or said:
                raise DataLost(f"no dataset at {root}, {num_saved} episodes counted as saved, log {said}")
            return
        with DatasetReader(root) as reader:
            if reader.num_episodes != num_saved or [i for i, _ in said] != list(range(num_saved)):
                raise DataLost(f"{reader.num_episodes} episodes in the dataset, {num_saved} counted, log {said}")
            for index, frames in said:
                length = int(reader.episodes[index]["length"])
                if length != frames or length == 0:
                    raise DataLost(f"episode {index}: {length} frames in the dataset, the log says {frames}")
                states = reader.episode_frames(index, "observation.state")
                if not np.array_equal(states[:, 1], -states[:, 0]) or np.any(np.diff(states[:, 0]) < 0):
                    raise DataLost(f"episode {index}: states not published together or not in time order: {states}")
                images = reader.episode_frames(index, "observation.images.cam")
                # A frame holds samples from its episode's time, or held from up to topic_timeout_s before it.
                early, late = starts[index] - round((TIMEOUT_S + 0.2) * NS), starts[index] + round(EPISODE_S * NS)
                joint_values = np.array([self.joint_value(s) for s in published["/j"] if early <= s <= late])
                pixel_values = {self.pixel_value(s) for s in published["/c"] if early <= s <= late}
                for state, image in zip(states, images, strict=True):
                    if not np.any(np.abs(joint_values - state[0]) <= 1e-5):
                        raise DataLost(f"episode {index}: a state {state.tolist()} no sensor published; {described}")
                    if image.min() != image.max() or int(image.flat[0]) not in pixel_values:
                        raise DataLost(f"episode {index}: an image no sensor published {np.unique(image)}; {described}")
