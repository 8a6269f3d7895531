"""RecordingSession without ROS: raw CDR messages and a hand-driven clock in, a real dataset out."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_dataset import DatasetReader
from lerobot_recorder.recorder.errors import RecorderError, WorkflowError
from lerobot_recorder.recorder.messages import build_typestore
from lerobot_recorder.recorder.session import (
    WAITING_FOR_CLOCK,
    RecordingSession,
    SamplingOptions,
    SessionHooks,
    SessionOptions,
    header_topics,
    open_dataset,
)
from lerobot_recorder.recorder.status import Level, StatusSnapshot
from lerobot_recorder.recorder.workflow import State, WorkflowConfig
from lerobot_ros.testing import LogLines

FPS = 10
CONTRACT = Contract.from_dict(
    {
        "robot_type": "test",
        "fps": FPS,
        "features": {
            "observation.state": {
                "topic": "/j",
                "type": "sensor_msgs/msg/JointState",
                "field": "position",
                "joints": ["a", "b"],
                "names": ["a.pos", "b.pos"],
            },
            "observation.images.cam": {
                "topic": "/c",
                "type": "sensor_msgs/msg/Image",
                "shape": [8, 8, 3],
                "dtype": "image",
            },
        },
    }
)
TYPESTORE = build_typestore(["sensor_msgs/msg/JointState", "sensor_msgs/msg/Image"])


def _header(stamp_ns: int) -> Any:
    Header = TYPESTORE.types["std_msgs/msg/Header"]
    Time = TYPESTORE.types["builtin_interfaces/msg/Time"]
    sec, nanosec = divmod(stamp_ns, NS)
    return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id="")


def joint_cdr(stamp_ns: int, position: tuple[float, float]) -> bytes:
    JointState = TYPESTORE.types["sensor_msgs/msg/JointState"]
    msg = JointState(
        header=_header(stamp_ns),
        name=["a", "b"],
        position=np.array(position, np.float64),
        velocity=np.zeros(0, np.float64),
        effort=np.zeros(0, np.float64),
    )
    return bytes(TYPESTORE.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def image_cdr(stamp_ns: int, value: int) -> bytes:
    Image = TYPESTORE.types["sensor_msgs/msg/Image"]
    msg = Image(
        header=_header(stamp_ns),
        height=8,
        width=8,
        encoding="rgb8",
        is_bigendian=0,
        step=24,
        data=np.full(8 * 8 * 3, value, np.uint8),
    )
    return bytes(TYPESTORE.serialize_cdr(msg, "sensor_msgs/msg/Image"))


class Node:
    """What the recorder node gives the session: a clock it moves by hand, a log, and what it published."""

    def __init__(self, now_ns: int = 1_000 * NS) -> None:
        self.now = now_ns
        self.log = LogLines()
        self.statuses: list[StatusSnapshot] = []
        self.markers: list[tuple[StatusSnapshot, int]] = []
        self.session: RecordingSession | None = None

    def hooks(self) -> SessionHooks:
        return SessionHooks(
            now_ns=lambda: self.now,
            log=self.log,
            publish_status=self.publish_status,
            publish_marker=lambda status, start: self.markers.append((status, start)),
        )

    def publish_status(self) -> None:
        assert self.session is not None
        self.statuses.append(self.session.take_status())


def make_session(
    tmp_path: Path,
    node: Node,
    *,
    episodes: int = 2,
    episode_s: float = 0.5,
    task: str = "pick",
    topic_timeout_s: float = 5.0,
    topic_wait_s: float = 60.0,
    **options: Any,
) -> RecordingSession:
    root = tmp_path / "ds"
    session = RecordingSession(SessionOptions(root=root, **options), node.hooks(), task=task)
    node.session = session
    writer = open_dataset(root, CONTRACT, FPS, video=True, codec="h264-ultrafast", resume=False, repo_id="")
    session.configure(
        CONTRACT,
        writer,
        WorkflowConfig(episode_time_s=episode_s, reset_time_s=0.0, num_episodes=episodes, topic_wait_s=topic_wait_s),
        SamplingOptions(fps=FPS, topic_timeout_s=topic_timeout_s),
        TYPESTORE,
        header_topics(CONTRACT, TYPESTORE),
    )
    return session


def run(
    node: Node,
    session: RecordingSession,
    seconds: float,
    step_ns: int = NS // 50,
    topics: tuple[str, ...] = ("/j", "/c"),
) -> None:
    """The topics publish at 50 Hz, stamped with the clock, and the sampling tick runs after each step."""
    for _ in range(round(seconds * NS / step_ns)):
        node.now += step_ns
        if "/j" in topics:
            session.on_message("/j", joint_cdr(node.now, (0.1, -0.2)))
        if "/c" in topics:
            session.on_message("/c", image_cdr(node.now, 7))
        session.tick()


def wait_for(node: Node, session: RecordingSession, state: State, limit_s: float = 60.0) -> None:
    """Keep the clock running until the workflow is in `state` (saves complete in the dataset thread)."""
    done = threading.Event()
    for _ in range(round(limit_s / 0.02)):
        assert session.workflow is not None
        if session.workflow.state is state:
            return
        run(node, session, 0.02)
        done.wait(0.02)
    raise AssertionError(f"still {session.workflow.state if session.workflow else None}, not {state}: {node.log.lines}")


def test_a_session_records_its_episodes_into_the_dataset(tmp_path: Path) -> None:
    node = Node()
    session = make_session(tmp_path, node, shutdown_when_done=True)
    assert session.topics == {"/j": "sensor_msgs/msg/JointState", "/c": "sensor_msgs/msg/Image"}
    session.activate(start_session=True)
    run(node, session, 0.1)  # every topic delivered: the session starts on a tick
    assert session.workflow is not None and session.workflow.state is State.RECORDING
    wait_for(node, session, State.STOPPED)
    session.release()

    assert session.num_saved == 2 and session.exit_code == 0
    assert [status.state for status, _ in node.markers] == [State.RECORDING, State.RECORDING]
    assert all(start > 1_000 * NS for _, start in node.markers)
    with DatasetReader(tmp_path / "ds") as reader:
        assert reader.num_episodes == 2
        lengths = [int(e["length"]) for e in reader.episodes]
        assert all(4 <= n <= 5 for n in lengths), lengths  # 0.5 s at 10 fps, the first frame after the start
        frame = reader[0]
        np.testing.assert_allclose(frame["observation.state"], [0.1, -0.2], rtol=1e-6)
        assert reader.tasks == ["pick"]
    assert "saved episode 1" in node.log.text("info")
    last = session.status()
    assert (last.state, last.num_episodes, last.episode_index) == (State.IDLE, 2, 2)  # released: no workflow


def test_a_goal_episode_cancelled_is_discarded_and_its_outcome_says_so(tmp_path: Path) -> None:
    node = Node()
    session = make_session(tmp_path, node, episode_s=30.0)
    session.activate(start_session=False)
    run(node, session, 0.1)
    assert session.accept_goal(active=False) == "the recorder is not active"
    assert session.accept_goal(active=True) is None
    assert session.accept_goal(active=True) == "the recorder is idle"  # one goal at a time
    session.start_goal("", 0.0)  # the session task, episode_time_s
    assert session.status().task == "pick" and session.status().state is State.RECORDING
    run(node, session, 0.3)
    outcome, counts = session.goal_progress()
    assert not outcome.get("done") and counts["frames"] > 0
    session.cancel_goal()
    for _ in range(3000):
        outcome, _ = session.goal_progress()
        if outcome.get("done"):
            break
        threading.Event().wait(0.01)
    assert outcome["done"] and not outcome["saved"] and outcome["message"] == "discarded"
    session.end_goal()
    assert session.accept_goal(active=True) is None
    session.end_goal()
    session.release()
    assert session.num_saved == 0


def test_controls_answer_in_words_and_refuse_what_means_nothing(tmp_path: Path) -> None:
    node = Node()
    session = make_session(tmp_path, node, episode_s=30.0)
    assert session.trigger("next") == (False, "next: nothing to do while idle")
    assert session.trigger("start session") == (True, "start session: now recording")
    with pytest.raises(WorkflowError, match="cannot start a session while recording"):
        session.trigger("start session")
    run(node, session, 0.3)
    assert session.trigger("re-record") == (True, "re-record: now resetting")  # then records it again
    session.release()
    with pytest.raises(WorkflowError, match="not configured"):
        session.trigger("stop")


def test_bad_messages_are_counted_and_named_and_the_episode_goes_on(tmp_path: Path) -> None:
    node = Node()
    session = make_session(tmp_path, node, episode_s=30.0)
    session.trigger("start session")
    session.on_message("/j", b"\x00\x01\x00\x00garbage")
    assert session.bad_messages == 1
    assert session.status().message.startswith("/j: message ignored:")
    assert "/j: message ignored" in node.log.text("warning")
    run(node, session, 0.3)
    report = session.diagnostics()
    assert report.values["bad_messages"] == "1" and report.values["state"] == "recording"
    assert int(report.values["frames"]) > 0 and "disk_free_mb" in report.values
    assert report.level is Level.OK
    session.release()


def test_before_the_first_clock_message_nothing_is_taken_and_the_status_says_why(tmp_path: Path) -> None:
    node = Node(now_ns=0)  # use_sim_time, no /clock yet
    session = make_session(tmp_path, node)
    assert session.status().message == WAITING_FOR_CLOCK
    session.on_message("/j", joint_cdr(5 * NS, (0.0, 0.0)))
    assert session.sampler is not None and session.sampler.silent == ["observation.state", "observation.images.cam"]
    node.now = 10 * NS
    session.tick()
    assert session.status().message == ""
    session.release()


def test_the_task_is_validated_and_applies_to_the_next_episodes(tmp_path: Path) -> None:
    node = Node()
    session = make_session(tmp_path, node, episode_s=30.0)
    with pytest.raises(ValueError, match="control characters"):
        session.set_task("bad\x07task")
    session.trigger("start session")
    session.set_task("place")
    assert session.status().task == "pick"  # the episode being recorded keeps its task
    assert session.workflow is not None and session.workflow.task == "place"
    session.set_task("")  # allowed: changes nothing but what an unconfigured status shows
    session.release()
    assert session.status().task == ""


def test_a_configure_error_is_the_status_until_configured(tmp_path: Path) -> None:
    node = Node()
    session = RecordingSession(SessionOptions(root=tmp_path / "ds"), node.hooks())
    node.session = session
    session.set_error("contract x.yaml: no such file")
    assert node.statuses[-1].state is State.ERROR
    assert node.statuses[-1].message == "contract x.yaml: no such file"
    report = session.diagnostics()  # /diagnostics agrees with ~/status: ERROR, with the reason
    assert (report.level, report.state, report.values["state"]) == (Level.ERROR, State.ERROR, "error")
    assert report.message == "contract x.yaml: no such file"
    writer = open_dataset(tmp_path / "ds", CONTRACT, FPS, video=True, codec="h264-ultrafast", resume=False, repo_id="")
    session.configure(CONTRACT, writer, WorkflowConfig(), SamplingOptions(fps=FPS), TYPESTORE, [])
    session.release()  # configured, then cleaned up: the old error is gone from both
    assert session.status().state is State.IDLE and session.status().message == ""
    assert (session.diagnostics().level, session.diagnostics().state) == (Level.OK, State.IDLE)


def test_a_full_disk_seen_by_diagnostics_stops_the_recording(tmp_path: Path) -> None:
    node = Node()
    session = make_session(tmp_path, node, episode_s=30.0, shutdown_when_done=True)
    session.trigger("start session")
    run(node, session, 0.2)
    session.options = dataclasses.replace(session.options, min_free_mb=1e12)  # the disk filled up meanwhile
    report = session.diagnostics()
    assert report.level is Level.ERROR and report.state is State.ERROR
    assert report.message.startswith("disk almost full:") and "saved episodes are intact" in report.message
    assert session.workflow is not None and session.workflow.state is State.ERROR
    assert session.exit_code == 1
    session.release()


def test_stamp_header_needs_headers_and_an_existing_root_needs_resume(tmp_path: Path) -> None:
    strings = Contract.from_dict(
        {
            "robot_type": "t",
            "fps": FPS,
            "features": {
                "observation.state": {
                    "topic": "/s",
                    "type": "std_msgs/msg/Float64MultiArray",
                    "field": "data",
                    "names": ["x", "y"],
                }
            },
        }
    )
    with pytest.raises(RecorderError, match="carry no header; set `stamp: receive`"):
        header_topics(strings, build_typestore(["std_msgs/msg/Float64MultiArray"]))
    root = tmp_path / "ds"
    root.mkdir()
    (root / "notes.txt").write_text("somebody's data")
    with pytest.raises(RecorderError, match="already exists; pass resume:=true"):
        open_dataset(root, CONTRACT, FPS, video=True, codec="h264-ultrafast", resume=False, repo_id="")
    with pytest.raises(RecorderError, match="holds no dataset"):
        open_dataset(root, CONTRACT, FPS, video=True, codec="h264-ultrafast", resume=True, repo_id="")


def _record_one_with_lag(tmp_path: Path, lag_ns: int) -> tuple[int, int]:
    """One 0.5 s goal episode while every message arrives `lag_ns` after its stamp; (frames, dropped)."""
    node = Node()
    session = make_session(tmp_path, node, episodes=1)
    session.activate(start_session=False)
    in_flight: list[tuple[int, str, bytes]] = []
    step_ns = NS // 50

    def advance(seconds: float) -> None:
        for _ in range(round(seconds * NS / step_ns)):
            node.now += step_ns
            in_flight.extend(
                [(node.now, "/j", joint_cdr(node.now, (0.1, -0.2))), (node.now, "/c", image_cdr(node.now, 7))]
            )
            while in_flight and in_flight[0][0] <= node.now - lag_ns:
                session.on_message(*in_flight.pop(0)[1:])
            session.tick()

    advance(0.3)  # the clock is known and the recorder idle
    assert session.accept_goal(active=True) is None
    session.start_goal("pick", 0.5)
    for _ in range(3000):
        outcome, _ = session.goal_progress()
        if outcome.get("done"):
            break
        advance(0.02)
        threading.Event().wait(0.005)  # the save runs in the dataset thread
    session.release()
    return int(outcome["frames"]), int(outcome["dropped"])


def test_an_episode_ends_with_the_frames_whose_samples_were_still_in_flight(tmp_path: Path) -> None:
    """Under load messages arrive 100 ms or more after their stamps. The episode's time is up on the recorder's
    clock before its last samples are in: it ends once they are, or once the latency window (150 ms) has passed
    and the last frames are judged as every other (here: no max_age, so they hold the last samples). Before, the
    last frames were neither saved nor counted as dropped (300 ms late: 3 frames of 5-6, 0 dropped)."""
    on_time = _record_one_with_lag(tmp_path / "on_time", 0)
    late = _record_one_with_lag(tmp_path / "late", 300_000_000)
    assert on_time == (5, 0)  # 0.5 s at 10 fps from the first message after the start (20 ms later)
    # The late run's frame 0 may be at the start itself (a message stamped at the start, delivered later): 6 slots.
    assert late[1] == 0 and late[0] in (5, 6), (on_time, late)


def _episode_with_joints_missing_at_start(tmp_path: Path, reported_lost: bool) -> tuple[dict[str, Any], Node, Any]:
    """One 0.5 s goal episode (10 fps; both topics at 50 Hz) whose first 0.3 s of joint states never reached the
    session: lost on the way (`reported_lost`: the node saw the gap in the publisher's sequence numbers), or never
    published (the publisher stalled). Returns the goal's outcome, the node and /diagnostics after frame 0."""
    node = Node()
    session = make_session(tmp_path, node, episodes=1)
    session.activate(start_session=False)
    run(node, session, 0.3)  # the clock is known, the recorder idle
    assert session.accept_goal(active=True) is None
    session.start_goal("pick", 0.5)
    lost = 0
    for _ in range(30):
        node.now += NS // 50
        if lost < 15:
            lost += 1  # published and never taken, or never published
        else:
            session.on_message("/j", joint_cdr(node.now, (0.1, -0.2)), lost=lost if reported_lost else 0)
            lost = 0
        session.on_message("/c", image_cdr(node.now, 7))
        session.tick()
    diagnostics = session.diagnostics()
    for _ in range(3000):
        outcome, _ = session.goal_progress()
        if outcome.get("done"):
            break
        run(node, session, 0.02)
        threading.Event().wait(0.005)  # the save runs in the dataset thread
    assert outcome["saved"], outcome
    session.release()
    return outcome, node, diagnostics


def test_messages_lost_across_the_episode_start_are_counted_as_dropped_frames(tmp_path: Path) -> None:
    """The joint states of the episode's first 0.3 s never reached the session (its subscription queue overflowed
    while the recorder was busy starting the episode; the node knows from the publisher's sequence numbers). Frame
    0 waits for the first joint state received, and the slots before it used to be neither saved nor counted
    (2 frames of 5 here, 0 dropped). They are dropped frames now, and the status and /diagnostics say why."""
    outcome, node, diagnostics = _episode_with_joints_missing_at_start(tmp_path, reported_lost=True)
    assert outcome["frames"] + outcome["dropped"] == 5, outcome  # 0.5 s at 10 fps from the first image
    assert outcome["frames"] == 2 and outcome["dropped"] == 3
    assert diagnostics.values["lost_messages"] == "15" and diagnostics.values["lost_messages./j"] == "15"
    assert diagnostics.values["dropped_lost"] == "3" and diagnostics.level is Level.WARN
    assert "/j: 15 message(s) lost before the recorder took them" in node.log.text("warning")
    assert "(3 frame(s) before it dropped: messages lost on the way)" in node.log.text("warning")


def test_a_publisher_stalled_at_the_start_shortens_the_episode_and_the_status_says_so(tmp_path: Path) -> None:
    """Joint states that were never published: frame 0 is where every topic has data (the rule shared with
    bag2dataset), so the slots before it are no frames and no drops -- but the shorter episode is not silent."""
    outcome, node, diagnostics = _episode_with_joints_missing_at_start(tmp_path, reported_lost=False)
    assert (outcome["frames"], outcome["dropped"]) == (2, 0)
    assert diagnostics.values["lost_messages"] == "0" and diagnostics.values["frame0_delay_s"] == "0.320"
    assert "frame 0 is 0.320 s after the episode start: no sample of observation.state until then" in node.log.text(
        "warning"
    )


def _run_until(node: Node, session: RecordingSession, done: Any, limit_s: float = 60.0, **kwargs: Any) -> None:
    """Keep `run`ning 20 ms at a time (pausing for the dataset thread) until `done()`."""
    for _ in range(round(limit_s / 0.02)):
        if done():
            return
        run(node, session, 0.02, **kwargs)
        threading.Event().wait(0.005)
    raise AssertionError(f"not reached: {session.status()} {node.log.lines[-5:]}")


def test_elapsed_counts_from_the_configure_while_idle_and_the_message_is_the_episodes_own(tmp_path: Path) -> None:
    """The first idle state used to count from time 0 (elapsed_s read the clock: ~1.8e9 on the wall clock), and a
    message about episode 0 (a bad message here) stayed on the status through episode 1."""
    node = Node()
    session = make_session(tmp_path, node, episode_s=1.0)
    assert session.status().elapsed_s == 0.0
    session.activate(start_session=False)
    run(node, session, 0.5)
    assert session.status().state is State.IDLE
    assert session.status().elapsed_s == pytest.approx(0.5)
    session.trigger("start session")
    run(node, session, 0.3)
    session.on_message("/j", b"not a joint state")
    assert "message ignored" in session.status().message
    _run_until(node, session, lambda: session.status().state is State.RECORDING and session.episode_index == 1)
    assert session.status().message == ""
    session.release()


def test_a_topic_that_goes_silent_ends_the_episode_and_holds_the_next_until_it_delivers(tmp_path: Path) -> None:
    """The camera stops mid-episode: the episode ends early and is saved (what it holds is good), no episode starts
    while the camera is silent (each one had no frames, was recorded again, and the session never ended), the
    status and /diagnostics say why, and the session goes on when the camera is back."""
    node = Node()
    session = make_session(tmp_path, node, episodes=2, episode_s=30.0, topic_timeout_s=0.5)
    session.activate(start_session=True)
    run(node, session, 1.0)
    assert session.workflow is not None and session.workflow.state is State.RECORDING
    _run_until(node, session, lambda: session.num_saved == 1, limit_s=5.0, topics=("/j",))
    text = "/c (observation.images.cam) sent nothing usable for"
    assert "episode 0 ended early and saved" in node.log.text("error") and text in node.log.text("error")
    with DatasetReader(tmp_path / "ds") as reader:
        assert reader.num_episodes == 1 and 9 <= int(reader.episodes[0]["length"]) <= 16
    run(node, session, 2.0, topics=("/j",))  # silent for longer than the wait to start would be
    status = session.status()
    assert status.state is State.RESETTING and status.episode_index == 1, status
    assert text in status.message and status.message.endswith("the next episode starts when it delivers again")
    diagnostics = session.diagnostics()
    assert diagnostics.values["silent_topics"] == "/c" and diagnostics.level is Level.WARN
    assert text in diagnostics.message
    assert session.trigger("next") == (False, "next: nothing to do while resetting")  # the right arrow waits too
    run(node, session, 0.1)  # the camera is back
    assert session.status().state is State.RECORDING and session.status().message == ""
    assert session.diagnostics().values["silent_topics"] == ""
    session.release()


def test_a_session_waiting_for_a_silent_topic_stops_after_topic_wait_s(tmp_path: Path) -> None:
    """It never hangs: after `topic_wait_s` the session stops in the error state (exit 1 with shutdown_when_done),
    the saved episode intact."""
    node = Node()
    session = make_session(
        tmp_path, node, episodes=3, episode_s=30.0, topic_timeout_s=0.5, topic_wait_s=2.0, shutdown_when_done=True
    )
    session.activate(start_session=True)
    run(node, session, 1.0)
    _run_until(node, session, lambda: session.num_saved == 1, limit_s=5.0, topics=("/j",))
    run(node, session, 1.0, topics=("/j",))
    assert session.status().state is State.RESETTING and session.exit_code is None
    run(node, session, 1.2, topics=("/j",))
    status = session.status()
    assert status.state is State.ERROR and session.exit_code == 1, status
    assert status.message.startswith("/c (observation.images.cam) sent nothing usable for")
    assert (
        "recording stopped after waiting 2.0 s for it (topic_wait_s), the saved episodes are intact" in status.message
    )
    assert session.accept_goal(active=True) == "the recorder is error"
    session.release()
    with DatasetReader(tmp_path / "ds") as reader:
        assert reader.num_episodes == 1


def test_an_episode_goal_is_refused_while_a_topic_is_silent(tmp_path: Path) -> None:
    node = Node()
    session = make_session(tmp_path, node, topic_timeout_s=0.5)
    session.activate(start_session=False)
    run(node, session, 1.0, topics=("/j",))
    assert session.accept_goal(active=True) is None
    with pytest.raises(
        WorkflowError, match=r"^/c \(observation.images.cam\) sent nothing usable for 1.0 s; no episode"
    ):
        session.start_goal("pick", 1.0)
    assert session.accept_goal(active=True) is None  # the refused goal freed the session
    session.end_goal()
    run(node, session, 0.1)
    session.start_goal("pick", 0.5)
    assert session.status().state is State.RECORDING
    session.release()
