"""`lerobot-ros bag record`, and the record-a-bag-then-convert workflow giving the live recorder's frames."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from recorder_helpers import CONTRACT, Diagnostics, record_one_episode, start_recorder, start_streams, status_watcher

from lerobot_bags.reader import BagSource
from lerobot_dataset import DatasetReader
from lerobot_ros.testing import venv_script

pytestmark = pytest.mark.ros


def lossless_contract(tmp_path: Path) -> Path:
    data = yaml.safe_load(CONTRACT.read_text())
    for feature in data["features"].values():
        if feature.get("dtype") == "video":
            feature["dtype"] = "image"  # PNG: frames compare exactly
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_bag_then_bag2dataset_gives_the_live_recording(processes, ros_node, tmp_path: Path) -> None:
    contract = lossless_contract(tmp_path)
    watcher = status_watcher(ros_node)
    diagnostics = Diagnostics(ros_node)
    streams = start_streams(processes)
    live_root = tmp_path / "live"
    start_recorder(processes, live_root, contract=str(contract), start_session=False, reliable=True, latency_s=0.3)
    watcher.wait_state("idle", timeout=40)
    bag = tmp_path / "bag"
    recorder = processes.start(
        [
            venv_script("lerobot-ros"),
            "bag",
            "record",
            "-e",
            "^/(follower|cameras)/|^/recorder/episode_start$",
            "-o",
            str(bag),
        ],
        name="bag-record",
    )
    recorder.wait_for_output(r"recording /recorder/episode_start", timeout=30)
    # Data must really flow into the bag before the episode starts (discovery can lag by seconds).
    for topic in ("/follower/joint_states", "/cameras/front/image_raw", "/cameras/wrist/image_raw"):
        recorder.wait_for_output(rf"first message on {topic}$", timeout=30)
    result, _ = record_one_episode(ros_node, "pick the cube", 1.5)
    assert result.saved, result.message
    # Samples delivered after their frame was taken (a stall longer than latency_s) and messages that never reached
    # the recorder (its queue overflowed while it stalled) are what the bag holds and the live recording could not:
    # the saved episode's counts, before the next episode resets them.
    saved = diagnostics.wait_for(lambda v: v.get("episodes_saved") == "1")
    missed = int(saved["late_samples"]) + int(saved.get("lost_messages", "0"))
    streams.send_signal(signal.SIGINT)  # the bag takes what is still on its way, then stops
    streams.wait(10)
    recorder.send_signal(signal.SIGINT)
    assert recorder.wait(30) == 0, recorder.output()[-3000:]
    output = recorder.output()
    assert '"error": null' in output
    missed += sum(json.loads(output[output.index("{") : output.rindex("}") + 1])["lost"].values())  # the bag's

    with BagSource(bag) as source:
        assert source.info.storage == "mcap"
        assert {"/follower/joint_states", "/cameras/front/image_raw", "/recorder/episode_start"} <= set(
            source.info.topics
        )
    converted = tmp_path / "converted"
    run = subprocess.run(
        [
            venv_script("lerobot-ros"),
            "bag2dataset",
            str(bag),
            "--contract",
            str(contract),
            "--output",
            str(converted),
            "--split",
            "marker:/recorder/episode_start",
            "--task",
            "pick the cube",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    live, offline = DatasetReader(live_root), DatasetReader(converted)
    assert live.num_episodes == offline.num_episodes == 1
    n = len(live)
    assert n >= 20 and len(offline) >= n  # the bag went on after the episode
    keys = ("observation.state", "observation.images.front", "observation.images.wrist")
    differ = [(i, key) for i in range(n) for key in keys if not np.array_equal(live[i][key], offline[i][key])]
    # Each late or lost sample can change at most the one value it would have been; with none, all are equal.
    assert len(differ) <= missed, f"{len(differ)} values differ, {missed} sample(s) late or lost: {differ[:10]} {saved}"

    # `resume` continues a dataset the bag converter wrote.
    start_streams(processes, name="streams-again")
    resumed = start_recorder(
        processes,
        converted,
        name="resumed",
        contract=str(contract),
        resume=True,
        episode_time_s=0.5,
        shutdown_when_done=True,
    )
    assert resumed.wait(60) == 0, resumed.output()[-3000:]
    assert DatasetReader(converted).num_episodes == 2


def test_bag_record_splits_by_duration(processes, tmp_path: Path) -> None:
    start_streams(processes)
    out = tmp_path / "split"
    recorder = processes.start(
        [
            venv_script("lerobot-ros"),
            "bag",
            "record",
            "/follower/joint_states",
            "-o",
            str(out),
            "--max-bag-duration",
            "0.5",
            "--duration",
            "2.0",
        ],
        name="bag-split",
    )
    assert recorder.wait(40) == 0, recorder.output()[-3000:]
    parts = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(parts) >= 3
    total = 0
    for part in parts:
        with BagSource(part) as source:
            total += sum(1 for _ in source.messages(["/follower/joint_states"]))
    assert total >= 100  # 100 Hz for ~1.5 s after discovery


def test_bag_record_stops_at_its_duration_on_a_live_topic(processes, tmp_path: Path) -> None:
    """`--duration 2` on a topic that never pauses (joints at 100 Hz) records 2 s, not 2 s plus a wait for a quiet
    moment that a live topic never gives (5 -> 10 s, 3 -> 8 s before)."""
    start_streams(processes)
    out = tmp_path / "timed"
    recorder = processes.start(
        [venv_script("lerobot-ros"), "bag", "record", "/follower/joint_states", "-o", str(out), "--duration", "2.0"],
        name="bag-timed",
    )
    assert recorder.wait(40) == 0, recorder.output()[-3000:]
    with BagSource(out) as source:
        stamps = [stamp for _, stamp, _ in source.messages(["/follower/joint_states"])]
    assert stamps, recorder.output()[-3000:]
    # Stamps are the messages' reception times; the recording starts before the first and ends at the duration.
    assert max(stamps) - min(stamps) <= 2_000_000_000, f"the bag spans {(max(stamps) - min(stamps)) / 1e9:.2f} s"


def test_bag_record_duration_counts_from_the_first_message(processes, tmp_path: Path) -> None:
    """Finding the publishers can take longer than `--duration` (seconds on a loaded host): the duration counts from
    the first message received, so the bag still spans it. Here the publisher starts only after a duration has
    passed since the recorder started (the bag was empty before)."""
    import time

    out = tmp_path / "late"
    recorder = processes.start(
        [venv_script("lerobot-ros"), "bag", "record", "/follower/joint_states", "-o", str(out), "--duration", "1.0"],
        name="bag-late",
    )
    recorder.wait_for_output("recording into", timeout=60)
    time.sleep(1.5)  # the scenario: longer than the duration, with nothing published yet
    start_streams(processes)
    assert recorder.wait(60) == 0, recorder.output()[-3000:]
    with BagSource(out) as source:
        stamps = [stamp for _, stamp, _ in source.messages(["/follower/joint_states"])]
    assert stamps, recorder.output()[-3000:]
    span_s = (max(stamps) - min(stamps)) / 1e9
    assert 0.5 <= span_s <= 1.0, f"the bag spans {span_s:.2f} s of a 1.0 s duration"


def test_bag_record_rejects_bad_selections(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from lerobot_ros.cli import main

    assert main(["bag", "record", "-e", "([", "-o", str(tmp_path / "x")]) == 2
    assert "not a valid regular expression" in capsys.readouterr().err
    assert main(["bag", "record", "-o", str(tmp_path / "y")]) == 2
    assert "no topics chosen" in capsys.readouterr().err


def test_bag_record_counts_the_messages_it_never_received(processes, ros_node, tmp_path: Path) -> None:
    """A burst of 3000 messages into its queue of 100: what never reached the bag recorder is counted per topic
    in its summary (the gaps in the publisher's sequence numbers), not silently missing from the bag."""
    import time

    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    publisher = ros_node.create_publisher(String, "/burst", qos)
    out = tmp_path / "burst"
    recorder = processes.start(
        [venv_script("lerobot-ros"), "bag", "record", "/burst", "-o", str(out), "--duration", "8.0"], name="bag-burst"
    )
    for _ in range(600):  # the recorder found the topic and subscribed (it looks every second)
        if publisher.get_subscription_count() > 0:
            break
        time.sleep(0.05)
    assert publisher.get_subscription_count() > 0, recorder.output()[-3000:]
    import signal
    import threading

    # The burst goes out while the recorder is stopped (SIGSTOP: a stall, deterministic; a recorder that keeps up
    # with a burst slowed by load loses nothing). Gaps show when a later message is taken, so messages go on
    # after the burst until the recorder's duration ends.
    published = 0

    def publish() -> None:
        nonlocal published
        publisher.publish(String(data=str(published)))
        published += 1

    for _ in range(10):
        publish()
        time.sleep(0.02)
    recorder.send_signal(signal.SIGSTOP)
    try:
        for _ in range(3000):
            publish()
    finally:
        recorder.send_signal(signal.SIGCONT)
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.05):
            publish()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        assert recorder.wait(40) == 0, recorder.output()[-3000:]
    finally:
        stop.set()
        thread.join(5)
    output = recorder.output()
    summary = json.loads(output[output.index("{") : output.rindex("}") + 1])
    received, lost = summary["messages"].get("/burst", 0), summary["lost"].get("/burst", 0)
    assert lost > 0 and received > 0 and received + lost <= published, summary
    assert "message(s) lost before the recorder took them" in output
