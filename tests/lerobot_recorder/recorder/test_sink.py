"""EpisodeSink without a graph: frames in order with controls, overrun, bad images, encoder crash, disk full."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lerobot_contract import Contract
from lerobot_contract.align import AlignedFrame, Pick, Sample
from lerobot_contract.frames import FrameDecoder
from lerobot_dataset import DatasetReader, DatasetWriter, EncoderError, feature_specs
from lerobot_dataset.validate import validate
from lerobot_recorder.recorder.sink import EpisodeSink, SinkEvent, is_disk_full

CONTRACT = Contract.from_dict(
    {
        "robot_type": "test",
        "fps": 10,
        "features": {
            "observation.state": {"topic": "/j", "type": "sensor_msgs/msg/JointState", "names": ["a", "b"]},
            "observation.images.cam": {
                "topic": "/c",
                "type": "sensor_msgs/msg/Image",
                "shape": [8, 8, 3],
                "dtype": "image",
            },
        },
    }
)


class Picture:
    """Duck-typed sensor_msgs/Image."""

    def __init__(self, value: int, size: int = 8) -> None:
        self.height = self.width = size
        self.encoding = "rgb8"
        self.is_bigendian = 0
        self.step = size * 3
        self.data = np.full(size * size * 3, value, np.uint8)


def frame(i: int, size: int = 8) -> AlignedFrame:
    picks = {
        "observation.state": Pick(Sample(i, 2 * i, np.array([i, -i], np.float64))),
        "observation.images.cam": Pick(Sample(i, 2 * i + 1, (i, size))),
    }
    return AlignedFrame(i, i, picks)


def make_sink(writer: Any, max_queue: int = 64) -> tuple[EpisodeSink, list[SinkEvent], threading.Event]:
    events: list[SinkEvent] = []
    done = threading.Event()

    def on_event(event: SinkEvent) -> None:
        events.append(event)
        if event.kind in ("saved", "failed"):
            done.set()

    values = FrameDecoder(CONTRACT, lambda payload, _type: Picture(*payload))
    return EpisodeSink(writer, values, on_event, max_queue=max_queue), events, done


def test_frames_and_controls_stay_in_order_and_bad_images_are_dropped(tmp_path: Path) -> None:
    writer = DatasetWriter.create(tmp_path / "ds", repo_id="t/s", fps=10, features=feature_specs(CONTRACT))
    sink, events, done = make_sink(writer)
    sink.start_episode("first")
    for i in range(5):
        assert sink.put_frame(frame(i))
    sink.put_frame(frame(5, size=4))  # the camera changed size: dropped, counted, explained
    sink.save_episode()
    sink.start_episode("second")  # frames queued after the save belong to the next episode
    sink.put_frame(frame(9))
    sink.save_episode()
    assert done.wait(20)
    sink.close()
    assert [e.kind for e in events] == ["started", "saved", "started", "saved"]
    assert sink.counters.bad_frames == 0  # counters are per episode: the second one had none
    reader = DatasetReader(tmp_path / "ds")
    assert [reader.episode_range(e) for e in range(2)] == [(0, 5), (5, 6)]
    assert int(reader[5]["observation.images.cam"][0, 0, 0]) == 9
    assert validate(tmp_path / "ds") == []


def test_bad_image_counted_with_its_reason(tmp_path: Path) -> None:
    writer = DatasetWriter.create(tmp_path / "ds", repo_id="t/s", fps=10, features=feature_specs(CONTRACT))
    sink, _, done = make_sink(writer)
    sink.start_episode("task")
    sink.put_frame(frame(0))
    sink.put_frame(frame(1, size=4))
    sink.save_episode()
    assert done.wait(20)
    assert sink.counters.bad_frames == 1
    assert "4x4 images but the contract declares shape [8, 8, 3]" in sink.counters.last_problem
    sink.close()


def test_a_non_finite_vector_drops_the_frame_not_the_episode(tmp_path: Path) -> None:
    """Issue 18 #3: a NaN that reaches the sink (the contract refuses it earlier) never reaches the dataset."""
    root = tmp_path / "ds"
    writer = DatasetWriter.create(root, repo_id="t/s", fps=10, features=feature_specs(CONTRACT))
    sink, events, done = make_sink(writer)
    sink.start_episode("task")
    sink.put_frame(frame(0))
    poisoned = frame(1)
    state = poisoned.picks["observation.state"].sample
    poisoned.picks["observation.state"] = Pick(Sample(state.stamp_ns, state.seq, np.array([1.0, np.nan])))
    sink.put_frame(poisoned)
    sink.put_frame(frame(2))
    sink.save_episode()
    assert done.wait(20)
    sink.close()
    assert [e.kind for e in events] == ["started", "saved"] and events[-1].frames == 2
    assert sink.counters.bad_frames == 1 and "non-finite" in sink.counters.last_problem
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert all(np.isfinite(reader[i]["observation.state"]).all() for i in range(len(reader)))


class BlockedWriter:
    """A writer whose add_frame waits until released (a stalled disk), or raises `error`."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.error = error
        self.root = Path("/")
        self.num_episodes = 3
        self.episode_frames = 0
        self.encode_lag_frames = 0
        self.discarded = 0

    def start_episode(self, task: str) -> int:
        return 3

    def add_frame(self, values: dict[str, Any]) -> None:
        if self.error is not None:
            raise self.error
        self.entered.set()
        self.release.wait(10)
        self.episode_frames += 1

    def discard_episode(self) -> None:
        self.discarded += 1

    def save_episode(self) -> int:
        return 3

    def close(self) -> None:
        self.release.set()


def test_a_full_queue_drops_and_counts_frames_instead_of_blocking() -> None:
    writer = BlockedWriter()
    sink, _, _ = make_sink(writer, max_queue=4)
    sink.start_episode("task")
    sink.put_frame(frame(0))
    assert writer.entered.wait(10)  # the thread took it and stalls in add_frame
    accepted = [sink.put_frame(frame(i)) for i in range(20)]
    assert accepted.count(True) == 4 and sink.counters.overrun == 16
    writer.release.set()
    sink.close()


@pytest.mark.parametrize(
    ("error", "fatal", "text"),
    [
        (EncoderError("the frame worker for 'cam' failed: boom"), False, "the video encoder failed"),
        (OSError(errno.ENOSPC, "No space left on device"), True, "disk full"),
    ],
)
def test_writer_failures_discard_the_episode_and_say_so(error: BaseException, fatal: bool, text: str) -> None:
    writer = BlockedWriter(error)
    sink, events, done = make_sink(writer)
    sink.start_episode("task")
    sink.put_frame(frame(0))
    assert done.wait(10)
    failed = events[-1]
    assert failed.kind == "failed" and failed.fatal is fatal and text in failed.message
    assert "3 saved episode(s)" in failed.message and "intact" in failed.message
    assert writer.discarded == 1
    sink.close()


def test_disk_full_is_found_through_causes() -> None:
    inner = OSError(errno.ENOSPC, "No space left on device")
    outer = RuntimeError("commit failed")
    outer.__cause__ = inner
    assert is_disk_full(outer)
    assert not is_disk_full(RuntimeError("other"))
