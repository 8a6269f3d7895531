"""The live recorder applies the bag converter's rules to raw messages (issue 30): CDR as rmw_serialize writes it
is taken, damaged images are left out one by one with their reason (frames hold the previous image), equal stamps
are duplicates (dropped) or conflicts (the later one wins)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_session import TYPESTORE, Node, _header, image_cdr, joint_cdr, make_session

from lerobot_contract.time import NS
from lerobot_dataset import DatasetReader
from lerobot_recorder.recorder.workflow import State


def _bad_image(stamp_ns: int, height: int, width: int, step: int) -> bytes:
    Image = TYPESTORE.types["sensor_msgs/msg/Image"]
    msg = Image(
        header=_header(stamp_ns),
        height=height,
        width=width,
        encoding="rgb8",
        is_bigendian=0,
        step=step,
        data=np.full(height * step, 99, np.uint8),
    )
    return bytes(TYPESTORE.serialize_cdr(msg, "sensor_msgs/msg/Image"))


def _record(tmp_path: Path, node: Node, send: Any) -> Any:
    """One 0.5 s episode; `send(session, step)` publishes at each 20 ms step instead of `run`'s topics."""
    session = make_session(tmp_path, node, episodes=1, episode_s=0.5)
    session.trigger("start session")
    for step in range(60):
        node.now += NS // 50
        send(session, step)
        session.tick()
        assert session.workflow is not None
        if session.workflow.state is State.STOPPED:
            break
    return session


def test_rmw_serialized_messages_published_raw_are_taken(tmp_path: Path) -> None:
    """serialize_message's JointState (8 bytes past its fields) published raw was refused as a size mismatch."""
    serialization = pytest.importorskip("rclpy.serialization")
    from sensor_msgs.msg import JointState

    def send(session: Any, step: int) -> None:
        msg = JointState(name=["a", "b"], position=[0.25, -0.5])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(node.now, NS)
        session.on_message("/j", bytes(serialization.serialize_message(msg)))
        session.on_message("/c", image_cdr(node.now, 7))

    node = Node()
    session = _record(tmp_path, node, send)
    assert session.bad_messages == 0, session.bad_message_reasons
    session.release()
    with DatasetReader(tmp_path / "ds") as reader:
        assert len(reader) >= 3
        np.testing.assert_allclose(reader[0]["observation.state"], [0.25, -0.5], rtol=1e-6)


def test_damaged_images_are_left_out_one_by_one(tmp_path: Path) -> None:
    """A 0x0 image and an rgb8 image whose step says mono reached the frames and dropped them; now each is
    counted with its reason and the frames hold the camera's previous image."""

    def send(session: Any, step: int) -> None:
        session.on_message("/j", joint_cdr(node.now, (0.1, -0.2)))
        if step == 8:
            session.on_message("/c", _bad_image(node.now, 0, 0, 0))
        elif step == 12:
            session.on_message("/c", _bad_image(node.now, 8, 8, 8))
        else:
            session.on_message("/c", image_cdr(node.now, step))

    node = Node()
    session = _record(tmp_path, node, send)
    assert session.bad_messages == 2
    reasons = session.diagnostics().values["bad_messages./c"]
    assert "1 x image is 0x0, the contract declares shape [8, 8, 3]" in reasons
    assert "1 x image step 8 is shorter than a row of 8 rgb8 pixels (24 bytes)" in reasons
    assert session.sink is not None and session.sink.counters.bad_frames == 0
    session.release()
    with DatasetReader(tmp_path / "ds") as reader:
        pixels = [int(reader[i]["observation.images.cam"][0, 0, 0]) for i in range(len(reader))]
    assert 99 not in pixels and 8 not in pixels and 12 not in pixels, pixels


def test_equal_stamps_live(tmp_path: Path) -> None:
    """A joint state delivered twice is dropped as a duplicate; one with the same stamp and other values wins."""

    def send(session: Any, step: int) -> None:
        session.on_message("/j", joint_cdr(node.now, (0.1, -0.2)))
        session.on_message("/j", joint_cdr(node.now, (0.1, -0.2)))  # a duplicate
        if step == 10:
            session.on_message("/j", joint_cdr(node.now, (0.3, 0.4)))  # a conflicting sample
        session.on_message("/c", image_cdr(node.now, 7))

    node = Node()
    session = _record(tmp_path, node, send)
    assert session.sampler is not None
    stats = session.sampler.report.features["observation.state"]
    assert stats.duplicates >= 20 and stats.equal_stamp_conflicts == 1
    session.release()
