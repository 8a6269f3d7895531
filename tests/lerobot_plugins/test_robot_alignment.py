"""The ROS robot's observation for time t is the frame the project's alignment rule builds for t.

The test publishes two known streams: joint states at 50 Hz whose positions encode their index, and 32x24 rgb8
images at 30 Hz filled with their index, each message stamped when it is sent and kept with its stamp. The robot
(`ContractRobot`, the code behind `--robot.type=ros`) reads them for a while; every observation comes with the frame
time it used (`ContractRobot.last_observation_time_ns`). The same messages then go through the bag converter's
`Aligner` in `hold` mode, with the vectors converted where they enter and the frames decoded by `FrameDecoder`, as
the recorder does, and each observation must equal the Aligner's frame for its time.

The robot's grid starts at the first time every feature has a sample (its sampler does not take the cameras'
stamp phase into account, which the recorder does), so the Aligner is given the messages from that point on: its
frame 0 is then the robot's frame 0, and both grids are the same. The robot waits 10 ms for late messages; a
message delivered later than that reaches a frame after it was released, so such a frame holds the feature's
previous message. Those frames are allowed only as many times as the robot's sampler counted late samples.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from plugin_stack import REPO

from lerobot_contract import load_contract
from lerobot_contract.align import AlignedFrame, Aligner, AlignFeature, Pick, Sample, frame_time
from lerobot_contract.frames import FrameDecoder
from lerobot_contract.time import NS
from lerobot_robot_ros.core import ContractRobot

STATE_TOPIC = "/known/joint_states"
IMAGE_TOPIC = "/known/front/image_raw"
COMMAND_TOPIC = "/known/joint_commands"
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
WIDTH, HEIGHT = 32, 24
OBSERVATIONS = 90


def known_contract(tmp_path: Path) -> Path:
    """The SO-101 contract with its joint states, one small camera and its action on the test's topics."""
    contract = load_contract(REPO / "config" / "contracts" / "so101.yaml")
    data: dict[str, Any] = yaml.safe_load(
        yaml.safe_dump(dict(contract.select(("observation.state", "observation.images.front", "action")).raw))
    )
    data["features"]["observation.state"]["topic"] = STATE_TOPIC
    data["features"]["observation.images.front"].update(topic=IMAGE_TOPIC, shape=[HEIGHT, WIDTH, 3])
    data["features"]["action"]["topic"] = COMMAND_TOPIC
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class KnownStream:
    """Publishes a message every 1/`rate_hz` s, built by `make(index)` and stamped now; keeps (stamp, message)."""

    def __init__(self, node: Any, msg_type: Any, topic: str, rate_hz: float, make: Any) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self.sent: list[tuple[int, Any]] = []
        self._node, self._make, self._period = node, make, 1.0 / rate_hz
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._publisher = node.create_publisher(msg_type, topic, qos)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=topic, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        index = 0
        while not self._stop.wait(self._period):
            now = self._node.get_clock().now()
            msg = self._make(index)
            msg.header.stamp = now.to_msg()
            self.sent.append((now.nanoseconds, msg))
            self._publisher.publish(msg)
            index += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def joint_state(index: int) -> Any:
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.name = list(JOINTS)
    msg.position = [0.001 * index + 0.1 * j for j in range(len(JOINTS))]  # radians; the gripper stays in range
    return msg


def image(index: int) -> Any:
    from sensor_msgs.msg import Image

    return Image(
        height=HEIGHT, width=WIDTH, encoding="rgb8", step=WIDTH * 3, data=bytes([index % 256]) * (WIDTH * HEIGHT * 3)
    )


def previous_message(stream: KnownStream, stamp_ns: int) -> Any:
    """The message `stream` sent just before the one stamped `stamp_ns`."""
    sent = sorted(stream.sent, key=lambda item: item[0])
    index = next(i for i, (stamp, _) in enumerate(sent) if stamp == stamp_ns)
    assert index > 0, "the rule's message is the stream's first"
    return sent[index - 1][1]


def grid_origin(times: list[int], stamps: list[int], fps: int) -> int:
    """The stamp every observed frame time lies on the grid of: the robot's frame 0 (a sample's stamp)."""
    first = min(times)
    for stamp in sorted((s for s in stamps if s <= first), reverse=True):
        if all(frame_time(stamp, round((t - stamp) * fps / NS), fps) == t for t in times):
            return stamp
    raise AssertionError(f"the observed frame times {times[:5]}... lie on no grid starting at a message's stamp")


def rule_frames(contract_file: Path, streams: dict[str, KnownStream], t0: int) -> dict[int, AlignedFrame]:
    """The frames the project's rule builds from the sent messages on the grid that starts at `t0`, by time.

    Each feature gets its newest message stamped at or before `t0` and everything after it, so the Aligner's frame
    0 (the first time every feature has a sample) is at `t0`. Vectors enter converted to dataset units, images as
    messages, as the recorder pushes them into its sampler.
    """
    contract = load_contract(contract_file)
    keys = list(streams)
    features = [AlignFeature(k, None if (a := contract.features[k].max_age_s) is None else round(a * NS)) for k in keys]
    tolerance = contract.sync_tolerance_s
    aligner = Aligner(features, contract.fps, tolerance_ns=None if tolerance is None else round(tolerance * NS))
    samples: list[tuple[int, str, Any]] = []
    for key, stream in streams.items():
        sent = sorted(stream.sent, key=lambda item: item[0])
        start = max(i for i, (stamp, _) in enumerate(sent) if stamp <= t0)
        feature = contract.features[key]
        for stamp, msg in sent[start:]:
            samples.append((stamp, key, msg if feature.is_image else feature.vector(msg)))
    frames: dict[int, AlignedFrame] = {}
    for stamp, key, payload in sorted(samples, key=lambda item: item[0]):
        frames.update((f.time_ns, f) for f in aligner.push(key, stamp, payload))
    frames.update((f.time_ns, f) for f in aligner.finish())
    assert aligner.report.t0_ns == t0
    return frames


@pytest.mark.ros
def test_observation_at_t_is_the_recorders_frame_for_t(ros_node: Any, tmp_path: Path) -> None:
    from sensor_msgs.msg import Image, JointState

    contract_file = known_contract(tmp_path)
    commands: list[Any] = []
    ros_node.create_subscription(JointState, COMMAND_TOPIC, commands.append, 10)  # the robot's driver's place
    streams = {
        "observation.state": KnownStream(ros_node, JointState, STATE_TOPIC, 50.0, joint_state),
        "observation.images.front": KnownStream(ros_node, Image, IMAGE_TOPIC, 30.0, image),
    }
    robot = ContractRobot(contract_file, connect_timeout_s=60.0, observation_timeout_s=30.0)
    observed: list[tuple[int, dict[str, Any]]] = []
    try:
        robot.connect()
        try:
            for _ in range(OBSERVATIONS):
                observation = robot.get_observation()
                assert robot.last_observation_time_ns is not None
                observed.append((robot.last_observation_time_ns, observation))
                time.sleep(1 / 30)
            late = robot._connected()._assembler._sampler.live.late_samples
        finally:
            robot.disconnect()
        # What RosRobot logs at disconnect: every image the observations held, the alignment's counters.
        assert robot.summary().startswith(f"{OBSERVATIONS} camera images "), robot.summary()
        assert "frames kept " in robot.summary()
        time.sleep(0.3)  # the streams go on past the last observed frame, so the rule releases it too
    finally:
        for stream in streams.values():
            stream.stop()

    contract = load_contract(contract_file)
    times = sorted({t for t, _ in observed})
    assert len(times) >= OBSERVATIONS // 3, f"the robot's frames did not advance: {len(times)} distinct times"
    t0 = grid_origin(times, [stamp for stream in streams.values() for stamp, _ in stream.sent], contract.fps)
    frames = rule_frames(contract_file, streams, t0)
    decoder = FrameDecoder(contract)
    names = contract.features["observation.state"].dataset_names or []
    held_older: set[tuple[str, int]] = set()
    for t, observation in observed:
        assert t in frames, (
            f"the rule drops the frame at {t} (slot {round((t - t0) * contract.fps / NS)}) the robot gave"
        )
        frame = frames[t]
        got = {
            "observation.state": np.array([observation[n] for n in names]),
            "observation.images.front": observation["front"],
        }
        assert got["observation.images.front"].shape == (HEIGHT, WIDTH, 3)
        for key, value in got.items():
            if np.allclose(value, decoder.value(key, frame.picks[key]), atol=1e-9):
                continue
            # Only a late message may make the robot hold the message sent before the rule's.
            stamp = frame.picks[key].sample.stamp_ns
            before = previous_message(streams[key], stamp)
            feature = contract.features[key]
            older = (
                decoder.value(key, Pick(Sample(stamp - 1, -1, before))) if feature.is_image else feature.vector(before)
            )
            np.testing.assert_allclose(value, older, atol=1e-9, err_msg=f"{key} at {t}: not the rule's message")
            held_older.add((key, stamp))
    assert len(held_older) <= late, (
        f"{len(held_older)} frames hold an older message than the rule's, the robot counted {late} late samples"
    )
