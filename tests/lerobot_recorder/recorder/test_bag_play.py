"""`lerobot-ros bag play`: what is published (bytes, order, counts), when (timing ratios), with which QoS."""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from recorder_helpers import start_streams
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

from lerobot_bags.errors import BagError
from lerobot_bags.play import BagPlayback, PlayOptions, PlayQos, recorded_qos
from lerobot_bags.reader import BagSource
from lerobot_bags.synthetic import SyntheticBagSpec, write_synthetic_bag
from lerobot_contract.time import NS
from lerobot_ros.testing import venv_script

FIXTURES = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "bags"


def fixture_bag(name: str) -> Path:
    path = FIXTURES / name
    if not (path / "metadata.yaml").is_file():
        pytest.skip(f"fixture bag {path} is not here (needs the shared/ folder beside the repo)")
    return path


def qos(reliability: QosReliability, durability: QosDurability, history: QosHistory, depth: int) -> Qos:
    never = QosTime(0, 0)
    return Qos(history, depth, reliability, durability, never, never, QosLiveliness.AUTOMATIC, never, False)


R, BE = QosReliability.RELIABLE, QosReliability.BEST_EFFORT
TL, VO = QosDurability.TRANSIENT_LOCAL, QosDurability.VOLATILE


def test_recorded_qos_follows_rosbag2s_adaptation() -> None:
    assert recorded_qos([]) == PlayQos(reliable=True, transient_local=False, keep_all=False, depth=10)
    assert recorded_qos([qos(R, TL, QosHistory.KEEP_LAST, 1)]) == PlayQos(True, True, False, 10)
    assert recorded_qos([qos(BE, VO, QosHistory.KEEP_LAST, 50)]) == PlayQos(False, False, False, 50)
    mixed = [qos(R, TL, QosHistory.KEEP_LAST, 5), qos(BE, VO, QosHistory.KEEP_LAST, 5)]
    assert recorded_qos(mixed) == PlayQos(reliable=False, transient_local=False, keep_all=False, depth=10)
    assert recorded_qos([qos(R, VO, QosHistory.KEEP_ALL, 0)]).keep_all
    assert recorded_qos([qos(R, VO, QosHistory.UNKNOWN, 0)]) == PlayQos()  # old bags: depth 0, history unknown


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0.0}, "--rate must be > 0"),
        ({"rate": float("nan")}, "--rate must be > 0"),
        ({"clock_hz": -1.0}, "--clock must be >= 0"),
        ({"start_offset_s": -0.5}, "--start-offset must be >= 0"),
    ],
)
def test_bad_options_name_the_option(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PlayOptions(**kwargs)


@pytest.mark.parametrize(("storage", "compression"), [("mcap", "none"), ("sqlite3", "file"), ("mcap", "message")])
def test_schedule_is_the_bag_timeline_scaled(tmp_path: Path, storage: str, compression: str) -> None:
    bag = write_synthetic_bag(
        tmp_path / "bag", SyntheticBagSpec(duration_s=1.0, cameras=(), storage=storage, compression=compression)
    )
    with BagSource(bag) as source:
        stored = list(source.messages(set(source.info.topics)))
    play = BagPlayback.open(bag, PlayOptions(rate=2.0, start_offset_s=0.25))
    assert set(play.topics) == {"/follower/joint_states", "/follower/joint_commands"}
    first = min(stamp for _, stamp, _ in stored)
    assert play.first_stamp_ns == first
    (messages,) = list(play.passes())
    due = list(messages)
    kept = [(t, s, bytes(r)) for t, s, r in stored if s >= first + NS // 4]
    assert [(d.topic, d.stamp_ns, d.raw) for d in due] == kept  # same bytes, same order, offset applied
    for d in due:
        assert d.at_s == pytest.approx((d.stamp_ns - first - NS / 4) / NS / 2.0)
    assert play.clock_ns(0.1) == first + NS // 4 + round(0.1 * 2.0 * NS)


def test_topic_selection_and_loop(tmp_path: Path) -> None:
    bag = write_synthetic_bag(tmp_path / "bag", SyntheticBagSpec(duration_s=0.3, cameras=()))
    play = BagPlayback.open(bag, PlayOptions(topics=("/follower/joint_states",), loop=True))
    assert list(play.topics) == ["/follower/joint_states"]
    passes = play.passes()
    counts = [sum(1 for _ in next(passes)) for _ in range(3)]  # --loop: pass after pass
    assert counts[0] == counts[1] == counts[2] == play.topics["/follower/joint_states"].count
    with pytest.raises(BagError, match=r"has no topic /nope \(topics: /follower/joint_commands"):
        BagPlayback.open(bag, PlayOptions(topics=("/nope",)))


def test_fixture_bags_unplayable_topics_are_named() -> None:
    events = fixture_bag("service_events_iron_mcap")
    play = BagPlayback.open(events, PlayOptions())  # everything publishable: only service events are skipped
    assert set(play.skipped) == {"/test_service1/_service_event", "/test_service2/_service_event"}
    with pytest.raises(BagError, match=r"nothing to play \(/array_topic: message type test_msgs/msg/Arrays is not"):
        BagPlayback.open(fixture_bag("cdr_test_custom_types_mcap"), PlayOptions(), lambda t: False)
    walker = BagPlayback.open(fixture_bag("walker_humble_sqlite3"), PlayOptions())
    assert walker.topics["/tf_static"].qos.transient_local  # latched stays latched
    assert not walker.topics["/joint_states"].qos.transient_local


class Capture:
    """Raw messages of some topics with their arrival times (monotonic s)."""

    def __init__(self, node: Any, topics: dict[str, Any], depth: int = 1000, latched: tuple[str, ...] = ()) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        self.messages: dict[str, list[tuple[float, bytes]]] = {t: [] for t in topics}
        self._lock = threading.Lock()
        for topic, cls in topics.items():
            profile = QoSProfile(
                depth=depth,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL if topic in latched else DurabilityPolicy.VOLATILE,
            )
            node.create_subscription(cls, topic, lambda raw, t=topic: self._on(t, raw), profile, raw=True)

    def _on(self, topic: str, raw: bytes) -> None:
        with self._lock:
            self.messages[topic].append((time.monotonic(), raw))

    def raws(self, topic: str) -> list[bytes]:
        with self._lock:
            return [raw for _, raw in self.messages[topic]]


def bag_messages(bag: Path, topics: set[str], offset_s: float = 0.0) -> dict[str, list[tuple[int, bytes]]]:
    with BagSource(bag) as source:
        stored = list(source.messages(topics))
    first = min(s for _, s, _ in stored)
    out: dict[str, list[tuple[int, bytes]]] = {t: [] for t in topics}
    for topic, stamp, raw in stored:
        if stamp >= first + round(offset_s * NS):
            out[topic].append((stamp, bytes(raw)))
    return out


def timing_slope(arrivals: list[float], stamps: list[int]) -> float:
    """Least-squares slope of arrival time (s) against bag time (s)."""
    x = (np.asarray(stamps, dtype=np.float64) - stamps[0]) / NS
    return float(np.polyfit(x, np.asarray(arrivals) - arrivals[0], 1)[0])


def play(processes: Any, bag: Path, *extra: str, name: str = "bag-play") -> Any:
    return processes.start(
        [venv_script("lerobot-ros"), "bag", "play", str(bag), "--wait-for-subscribers", *extra], name=name
    )


def summary_of(output: str) -> dict[str, Any]:
    return json.loads(output[output.rindex("\n{") :])


@pytest.mark.ros
def test_a_recorded_bag_plays_back_byte_for_byte_on_time(processes: Any, ros_node: Any, tmp_path: Path) -> None:
    from sensor_msgs.msg import Image, JointState

    streams = start_streams(processes)
    bag = tmp_path / "recorded"
    topics = ["/follower/joint_states", "/cameras/front/image_raw"]
    recorder = processes.start(
        [venv_script("lerobot-ros"), "bag", "record", *topics, "-o", str(bag), "--duration", "4"], name="bag-record"
    )
    assert recorder.wait(60) == 0, recorder.output()[-3000:]
    expected = bag_messages(bag, set(topics))
    assert len(expected["/follower/joint_states"]) >= 100 and len(expected["/cameras/front/image_raw"]) >= 30
    streams.stop()  # from here on, the player is the only publisher

    capture = Capture(ros_node, {topics[0]: JointState, topics[1]: Image})
    player = play(processes, bag, "--rate", "2")
    assert player.wait(60) == 0, player.output()[-3000:]
    summary = summary_of(player.output())
    assert summary["published"] == {t: len(v) for t, v in expected.items()}
    assert summary["unacknowledged"] == []
    for topic in topics:
        assert capture.raws(topic) == [raw for _, raw in expected[topic]], topic  # every message, in order
        arrivals = [at for at, _ in capture.messages[topic]]
        slope = timing_slope(arrivals, [stamp for stamp, _ in expected[topic]])
        assert 0.4 < slope < 0.6, f"{topic}: played at {1 / slope:.2f}x instead of 2x"


@pytest.mark.ros
def test_real_fixture_bags_play_with_offset_and_clock(processes: Any, ros_node: Any) -> None:
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    walker = fixture_bag("walker_humble_sqlite3")
    talker = fixture_bag("talker_zstd_message_sqlite3")  # zstd per-message compression, 4 split files
    clocks: list[int] = []
    ros_node.create_subscription(Clock, "/clock", lambda m: clocks.append(m.clock.sec * NS + m.clock.nanosec), 10)
    capture = Capture(ros_node, {"/joint_states": JointState, "/topic": String})

    expected = bag_messages(walker, {"/joint_states"}, offset_s=20.0)["/joint_states"]
    player = play(
        processes, walker, "--topics", "/joint_states", "--start-offset", "20", "--rate", "2", "--clock", "50"
    )
    assert player.wait(60) == 0, player.output()[-3000:]
    assert capture.raws("/joint_states") == [raw for _, raw in expected]
    slope = timing_slope([at for at, _ in capture.messages["/joint_states"]], [s for s, _ in expected])
    assert 0.4 < slope < 0.6
    assert len(clocks) > 10
    assert all(b >= a for a, b in itertools.pairwise(clocks))  # the bag's clock, running forward
    assert expected[0][0] - NS // 5 <= clocks[0] and clocks[-1] <= expected[-1][0] + NS

    expected = bag_messages(talker, {"/topic"}, offset_s=170.0)["/topic"]
    player = play(processes, talker, "--topics", "/topic", "--start-offset", "170", "--rate", "4", name="talker")
    assert player.wait(60) == 0, player.output()[-3000:]
    assert capture.raws("/topic") == [raw for _, raw in expected] and len(expected) >= 10


@pytest.mark.ros
def test_loop_plays_again_until_stopped(processes: Any, ros_node: Any) -> None:
    from std_msgs.msg import String

    bag = fixture_bag("talker_foxy_sqlite3")  # 10 messages on /topic over 4.5 s
    capture = Capture(ros_node, {"/topic": String})
    player = play(processes, bag, "--topics", "/topic", "--loop", "--rate", "10")
    deadline = time.monotonic() + 60
    while len(capture.raws("/topic")) < 25 and time.monotonic() < deadline:
        time.sleep(0.05)
    player.send_signal(signal.SIGINT)
    assert player.wait(20) == 0, player.output()[-3000:]
    raws = capture.raws("/topic")
    assert len(raws) >= 25
    assert raws[10:20] == raws[:10]  # the second pass is the first again


def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from lerobot_ros.cli import main

    assert main(["bag", "play", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing" in err
    bag = write_synthetic_bag(tmp_path / "bag", SyntheticBagSpec(duration_s=0.2, cameras=()))
    assert main(["bag", "play", str(bag), "--rate", "-1"]) == 2
    assert "--rate must be > 0" in capsys.readouterr().err
    assert main(["bag", "play", str(bag), "--topics", "/x"]) == 2
    assert "has no topic /x" in capsys.readouterr().err


@pytest.mark.ros
@pytest.mark.slow
def test_a_bag_played_into_the_recorder_gives_bag2dataset_of_that_bag(
    processes: Any, ros_node: Any, tmp_path: Path
) -> None:
    """The live recorder, fed by the player, records what bag2dataset makes of the same bag.

    The recorder marks its episode start (~/episode_start, header stamp = the start on the stamps' clock, here
    the bag's); that marker and one at the episode's end are added to a copy of the bag, so that
    `bag2dataset --split marker:` cuts the window the live episode covers.
    """
    import subprocess
    import sys

    import yaml
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from recorder_helpers import Diagnostics, record_one_episode, start_recorder, status_watcher
    from rosbags.rosbag2 import Writer

    from lerobot_bags.synthetic import contract_for
    from lerobot_dataset import DatasetReader
    from lerobot_msgs.msg import RecorderStatus
    from lerobot_recorder.recorder.messages import build_typestore

    spec = SyntheticBagSpec(duration_s=8.0, cameras=("front",), height=48, width=64, storage="sqlite3")
    bag = write_synthetic_bag(tmp_path / "bag", spec)
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(contract_for(spec).raw, sort_keys=False))

    markers: list[bytes] = []
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
    ros_node.create_subscription(RecorderStatus, "/recorder/episode_start", markers.append, latched, raw=True)
    watcher = status_watcher(ros_node)
    diagnostics = Diagnostics(ros_node)
    live = tmp_path / "live"
    start_recorder(processes, live, contract=str(contract), start_session=False, reliable=True, latency_s=0.3)
    watcher.wait_state("idle", timeout=40)
    player = play(processes, bag)
    player.wait_for_output(r"playing ", timeout=60)
    time.sleep(1.0)  # a second into the bag
    duration_s = 3.0
    result, _ = record_one_episode(ros_node, "play", duration_s)
    assert result.saved, result.message
    # What the recorder could not take as the bag holds it (a stall under load): samples late for their frame,
    # messages lost before it took them, frames it dropped (all counted; before the next episode resets them).
    saved = diagnostics.wait_for(lambda v: v.get("episodes_saved") == "1")
    missed = int(saved["late_samples"]) + int(saved.get("lost_messages", "0"))
    dropped = int(saved["dropped"])
    assert player.wait(60) == 0, player.output()[-3000:]
    assert len(markers) == 1

    # The same bag, plus the episode's start marker and one at its end.
    from rclpy.serialization import deserialize_message

    start_ns = Time_ns(deserialize_message(markers[0], RecorderStatus).header.stamp)
    marked = tmp_path / "marked"
    store = build_typestore(["lerobot_msgs/msg/RecorderStatus"], [sys.prefix])
    with BagSource(bag) as source:
        stored = list(source.messages(set(source.info.topics)))
        types = {t: i.msgtype for t, i in source.info.topics.items()}
        store.register({k: v for k, v in source.typestore.fielddefs.items() if k not in store.fielddefs})
    with Writer(marked, version=9) as writer:
        conns = {t: writer.add_connection(t, m, typestore=store) for t, m in types.items()}
        marker = writer.add_connection("/recorder/episode_start", "lerobot_msgs/msg/RecorderStatus", typestore=store)
        end_msg = deserialize_message(markers[0], RecorderStatus)
        end_ns = start_ns + round(duration_s * NS)
        end_msg.header.stamp.sec, end_msg.header.stamp.nanosec = divmod(end_ns, NS)
        from rclpy.serialization import serialize_message

        pending = sorted([(start_ns, markers[0]), (end_ns, serialize_message(end_msg))])
        for topic, stamp, raw in stored:
            while pending and pending[0][0] <= stamp:
                at, payload = pending.pop(0)
                writer.write(marker, at, payload)
            writer.write(conns[topic], stamp, bytes(raw))
    converted = tmp_path / "converted"
    run = subprocess.run(
        [venv_script("lerobot-ros"), "bag2dataset", str(marked), "--contract", str(contract), "--output",
         str(converted), "--split", "marker:/recorder/episode_start", "--task", "play", "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    live_data, offline = DatasetReader(live), DatasetReader(converted)
    assert live_data.num_episodes == 1
    live_frames = live_data.episode_range(0)
    offline_frames = offline.episode_range(0)
    n_live, n_off = live_frames[1] - live_frames[0], offline_frames[1] - offline_frames[0]
    print(f"live {n_live} frames, bag2dataset {n_off} frames")
    assert n_live >= 0.8 * duration_s * 30 and abs(n_live + dropped - n_off) <= 1, (n_live, dropped, n_off, saved)
    # Frame by frame: each live frame is the next bag2dataset frame, or a later one where the recorder dropped
    # frames (counted); its values differ only where a sample was late or lost (counted). With nothing counted,
    # the two are equal frame for frame.
    keys = ("observation.state", "action", "observation.images.front")
    j, end, skipped, differ = offline_frames[0], offline_frames[1], 0, []
    for i in range(n_live):
        if j >= end:
            break  # the live episode's one frame past bag2dataset's cut (the frame counts agree within one)
        a = live_data[live_frames[0] + i]
        match = next(
            (k for k in range(j, min(j + 1 + dropped, end)) if all(np.array_equal(a[x], offline[k][x]) for x in keys)),
            None,
        )
        if match is None:
            differ.append(i)
            j += 1
        else:
            skipped, j = skipped + match - j, match + 1
    assert len(differ) <= missed and skipped <= dropped, (differ, skipped, saved)


def Time_ns(stamp: Any) -> int:
    return int(stamp.sec) * NS + int(stamp.nanosec)


@pytest.mark.ros
def test_recorded_qos_is_kept_and_played(processes: Any, ros_node: Any, tmp_path: Path) -> None:
    """`bag record` writes the publishers' QoS into the metadata; `bag play` offers it: a latched topic stays
    latched for a subscriber that joins after it was played, a best-effort stream stays best effort."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from lerobot_ros.testing import wait_for_messages

    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    description = ros_node.create_publisher(String, "/description", latched)
    description.publish(String(data="so101"))
    stream = ros_node.create_publisher(
        String, "/stream", QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
    )
    timer = ros_node.create_timer(0.05, lambda: stream.publish(String(data="tick")))
    bag = tmp_path / "qos"
    recorder = processes.start(
        [venv_script("lerobot-ros"), "bag", "record", "/description", "/stream", "-o", str(bag), "--duration", "4"],
        name="bag-record",
    )
    assert recorder.wait(60) == 0, recorder.output()[-3000:]
    ros_node.destroy_timer(timer)
    ros_node.destroy_publisher(stream)
    ros_node.destroy_publisher(description)

    playback = BagPlayback.open(bag, PlayOptions())
    assert playback.topics["/description"].qos == PlayQos(reliable=True, transient_local=True, depth=10)
    assert not playback.topics["/stream"].qos.reliable
    player = processes.start([venv_script("lerobot-ros"), "bag", "play", str(bag)], name="bag-play")
    player.wait_for_output(r"playing ", timeout=60)
    time.sleep(0.5)  # the latched message has been played before this subscriber exists
    (late,) = wait_for_messages(ros_node, String, "/description", count=1, timeout=20, qos=latched)
    assert late.data == "so101"
    assert player.wait(60) == 0, player.output()[-3000:]
