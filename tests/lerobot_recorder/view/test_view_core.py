"""The view's pure logging core (lerobot_recorder.view.entities): chunk overlay, topic table, entities written
to an .rrd and read back with Rerun's own reader (see rrd_contents.py for why the .rrd, not a screenshot)."""

from __future__ import annotations

import numpy as np
import pytest
import rerun as rr
from rrd_contents import read_rrd

from lerobot_recorder.view.entities import (
    Chunk,
    ChunkOverlay,
    TopicCounter,
    ViewLogger,
    camera_path,
    entity_part,
    vector_paths,
)

NAMES = ("a.pos", "b.pos")


def chunk(stamp: float, first: float, chunk_id: int, horizon: int = 10, period: float = 0.1) -> Chunk:
    """A chunk whose column 0 counts up from `first` and column 1 is -chunk_id."""
    data = np.stack([first + np.arange(horizon), np.full(horizon, -chunk_id)], axis=1).astype(np.float64)
    return Chunk(stamp, period, NAMES, data, chunk_id)


def test_overlay_draws_each_interval_once_with_the_plan_in_force_and_the_one_it_replaced():
    overlay = ChunkOverlay()
    assert overlay.add(chunk(10.0, 0.0, 1)) == []
    segments = overlay.add(chunk(10.3, 100.0, 2))
    # [10.0, 10.3): chunk 1 was in force, no chunk before it.
    assert [(s.series, s.chunk_id) for s in segments] == [("current", 1)]
    np.testing.assert_allclose(segments[0].times, [10.0, 10.1, 10.2])
    np.testing.assert_allclose(segments[0].values[:, 0], [0.0, 1.0, 2.0])
    segments = overlay.add(chunk(10.5, 200.0, 3))
    by_series = {s.series: s for s in segments}
    # [10.3, 10.5): chunk 2 in force, chunk 1 is what it replaced (its steps 3 and 4).
    assert by_series["current"].chunk_id == 2 and by_series["previous"].chunk_id == 1
    np.testing.assert_allclose(by_series["current"].times, [10.3, 10.4])
    np.testing.assert_allclose(by_series["current"].values[:, 0], [100.0, 101.0])
    np.testing.assert_allclose(by_series["previous"].values[:, 0], [3.0, 4.0])
    last = {s.series: s for s in overlay.finish()}
    # The newest chunk to its end; the one before it over the same span (it ends at 10.3 + 0.9).
    assert last["current"].chunk_id == 3 and last["current"].times.size == 10
    assert last["previous"].chunk_id == 2 and last["previous"].times[-1] == pytest.approx(11.2)
    assert overlay.finish() == []


def test_overlay_series_never_go_back_in_time():
    overlay = ChunkOverlay()
    times: dict[str, list[float]] = {"current": [], "previous": []}
    for k in range(20):
        for segment in overlay.add(chunk(1.0 + 0.25 * k, 0.0, k, horizon=30, period=1 / 30)):
            times[segment.series].extend(segment.times.tolist())
    for segment in overlay.finish():
        times[segment.series].extend(segment.times.tolist())
    for series, values in times.items():
        assert values == sorted(values), f"{series} zig-zags"
        assert len(values) == len(set(values))


def test_overlay_starts_over_when_the_clock_goes_back():
    overlay = ChunkOverlay()
    overlay.add(chunk(50.0, 0.0, 1))
    assert overlay.add(chunk(1.0, 0.0, 2)) == []  # a sim reset: nothing spans the jump
    assert [s.chunk_id for s in overlay.finish()] == [2]


def test_chunk_rejects_a_shape_that_does_not_match_its_names():
    with pytest.raises(ValueError, match="shape"):
        Chunk(0.0, 0.1, NAMES, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="period_s"):
        Chunk(0.0, 0.0, NAMES, np.zeros((4, 2)))


def test_topic_table_lists_a_silent_topic_as_missing():
    topics = {"/joint_states": "observation.state", "/cameras/top/image_raw": "observation.images.top"}
    counter = TopicCounter(topics, 0.0)
    for i in range(10):
        counter.seen("/joint_states", 0.1 * i)
    assert counter.missing() == ["/cameras/top/image_raw"]
    table = counter.table(2.0)
    assert "| `/cameras/top/image_raw` | observation.images.top | 0 | 0.0 | MISSING (no message yet) |" in table
    assert "| `/joint_states` | observation.state | 10 | 5.0 | ok" in table


def test_entity_paths():
    assert entity_part("/follower/executor: action executor") == "follower_executor_action_executor"
    assert camera_path("observation.images.front") == "cameras/front"
    assert vector_paths("observation.state", ["a.pos"]) == ["joints/a.pos/state"]
    assert vector_paths("action", ["a.pos"]) == ["joints/a.pos/action"]
    assert vector_paths("observation.environment_state", ["block.x"]) == [
        "features/observation.environment_state/block.x"
    ]


def test_logger_entities_read_back_from_the_rrd(tmp_path):
    path = tmp_path / "view.rrd"
    rec = rr.RecordingStream("test_view_core", send_properties=False)
    rec.save(path)
    view = ViewLogger(rec)
    view.log_styles({"observation.state": list(NAMES), "action": list(NAMES)}, list(NAMES))
    view.log_vectors("observation.state", NAMES, [1.0, 1.1, 1.2], [[1, 2], [3, 4], [5, 6]])
    view.log_vectors("action", NAMES, [1.05], [[7, 8]])
    picture = np.zeros((6, 8, 3), np.uint8)
    picture[..., 1] = 200
    view.log_image("observation.images.front", 1.0, picture)
    view.log_recorder_status(1.0, state="idle", episode_index=0, frames=0, dropped=0)
    view.log_recorder_status(1.1, state="recording", episode_index=0, frames=3, dropped=0, task="pick")
    view.log_recorder_status(1.2, state="recording", episode_index=0, frames=6, dropped=1, task="pick")
    view.log_recorder_status(1.3, state="saving", episode_index=0, frames=9, dropped=1, task="pick")
    values = {"starved": "true", "starvation_s": "0.250", "output": "joint_trajectory", "latency_ms": "nan"}
    view.log_diagnostic(1.0, "/executor: action executor", 1, "starved: holding", values)
    view.log_diagnostic(1.1, "/executor: action executor", 1, "starved: holding", values)
    view.log_chunk_segments(ChunkOverlay().finish() or [])
    overlay = ChunkOverlay()
    overlay.add(chunk(1.0, 0.0, 1, horizon=3))
    view.log_chunk_segments(overlay.finish())
    rec.flush()
    rec.disconnect()

    entities = read_rrd(path)
    np.testing.assert_allclose(entities["/joints/a.pos/state"].scalars("ros_time"), [1, 3, 5])
    np.testing.assert_allclose(entities["/joints/b.pos/action"].scalars(), [8])
    assert entities["/joints/a.pos/state"].static_rows == 1  # the series style (name, colour)
    np.testing.assert_allclose(entities["/joints/a.pos/chunk/current"].scalars(), [0, 1, 2])
    image = entities["/cameras/front"]
    assert image.rows == 1
    assert np.frombuffer(bytes(image.columns["Image:buffer"][0][0]), np.uint8).reshape(6, 8, 3)[0, 0, 1] == 200
    # Episode boundaries: `recording` steps 0 -> 1 -> 0; one event line per state change.
    np.testing.assert_allclose(entities["/recorder/recording"].scalars("ros_time"), [0, 1, 1, 0])
    assert entities["/recorder/events"].texts() == [
        "episode 0: idle",
        "episode 0: recording (pick)",
        "episode 0: saving (pick)",
    ]
    # Numeric diagnostic values become plots (true = 1); text and NaN do not; the message is logged once.
    base = "/diagnostics/executor_action_executor"
    np.testing.assert_allclose(entities[f"{base}/starved"].scalars(), [1, 1])
    np.testing.assert_allclose(entities[f"{base}/starvation_s"].scalars(), [0.25, 0.25])
    np.testing.assert_allclose(entities[f"{base}/level"].scalars(), [1, 1])
    assert f"{base}/output" not in entities and f"{base}/latency_ms" not in entities
    assert entities[f"{base}/status"].texts() == ["/executor: action executor: starved: holding"]


def test_logger_refuses_a_bad_jpeg_quality():
    with pytest.raises(ValueError, match="jpeg_quality"):
        ViewLogger(rr.RecordingStream("x", send_properties=False), jpeg_quality=101)
