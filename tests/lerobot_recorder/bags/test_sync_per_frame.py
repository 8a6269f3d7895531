"""bag2dataset's sync report records each frame: per feature, frame time minus the stamp of the sample the frame
took (ms) and the frames that reused the previous frame's sample, checked against the bag read independently."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bag_helpers import convert
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from lerobot_bags.pipeline import report_path_for
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
from lerobot_contract.align import Aligner, AlignFeature
from lerobot_contract.time import NS
from lerobot_dataset import DatasetReader

MakeBag = Callable[..., Path]
JITTER_S = 0.012  # stamps up to 12 ms off a 33 ms grid: some frames reuse an image
JOINT_HZ = 30.0  # joints at 30 Hz too, so that 12 ms of jitter keeps each topic's stamps in order


def _header_stamps(bag: Path, topic: str) -> list[int]:
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([bag], default_typestore=typestore) as reader:
        conns = [c for c in reader.connections if c.topic == topic]
        return [
            (m := reader.deserialize(raw, conn.msgtype)).header.stamp.sec * NS + m.header.stamp.nanosec
            for conn, _, raw in reader.messages(connections=conns)
        ]


def test_sync_report_holds_each_frames_skew_and_reuse(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=2.0, height=24, width=32, jitter_s=JITTER_S, joint_hz=JOINT_HZ)
    bag = make_bag("bag", duration_s=2.0, jitter_s=JITTER_S, joint_hz=JOINT_HZ)
    contract = contract_for(spec, max_age_s=None)
    root = tmp_path / "ds"
    result = convert([bag], contract, root)
    assert not result.failed and len(result.episodes) == 1
    entry = json.loads(report_path_for(root).read_text())["runs"][0]["episodes"][0]
    t0 = round(entry["start_stamp_s"] * NS)
    with DatasetReader(root) as reader:
        frames = reader.episode_range(0)[1] - reader.episode_range(0)[0]
        frame_index = reader.episode_frames(0, "frame_index").astype(np.int64).reshape(-1)
    assert frames == entry["frames"] > 50
    times = [t0 + (2 * int(k) * NS + contract.fps) // (2 * contract.fps) for k in frame_index]
    reused_total = 0
    for key, feature in contract.features.items():
        stamps = np.asarray(_header_stamps(bag, feature.topic))
        chosen = np.searchsorted(stamps, times, side="right") - 1  # hold: the newest sample at or before the frame
        record = entry["per_frame"][key]
        assert len(record["skew_ms"]) == frames, key
        np.testing.assert_allclose(record["skew_ms"], (np.asarray(times) - stamps[chosen]) / 1e6, atol=1e-3)
        assert record["reused_frames"] == [k for k in range(1, frames) if chosen[k] == chosen[k - 1]], key
        assert len(record["reused_frames"]) == entry["features"][key]["reused"], key
        reused_total += len(record["reused_frames"]) if key.startswith("observation.images") else 0
    assert reused_total > 0  # the jitter made some frames reuse an image: the reuse record is exercised
    # The existing summary fields are unchanged, and the saved report keeps each per-frame list on one line.
    assert set(entry["features"]["observation.state"]) == {
        "samples",
        "max_skew_s",
        "mean_skew_s",
        "stale_drops",
        "reused",
        "unused",
        "duplicates",
        "equal_stamp_conflicts",
        "unusable",
    }
    text = report_path_for(root).read_text()
    assert '"skew_ms": [' + ", ".join(str(s) for s in entry["per_frame"]["action"]["skew_ms"]) + "]" in text


def test_sync_per_frame_record_follows_nearest_and_linear_picks() -> None:
    """Signed skews: a frame that took a later sample (nearest) or a blend (linear) has its effective stamp."""
    fps = 10
    features = [AlignFeature("a", interpolate=True), AlignFeature("b")]
    expected = {"nearest": [0.0, -20.0, 30.0], "linear": [0.0, 0.0, 0.0]}
    for mode, skews in expected.items():
        aligner = Aligner(features, fps, mode, per_frame=True)
        frames = []
        for t_ms in (0, 120, 170, 300):  # a: 0, 120 ms, 170 ms, 300 ms; b: every 100 ms
            frames += aligner.push("a", t_ms * 1_000_000, np.zeros(1))
        for t_ms in (0, 100, 200, 300):
            frames += aligner.push("b", t_ms * 1_000_000, np.zeros(1))
        frames += aligner.finish()
        per_frame = aligner.report.as_dict()["per_frame"]
        assert len(frames) == 4
        assert per_frame["a"]["skew_ms"][:3] == skews, mode
        assert per_frame["b"]["skew_ms"] == [0.0, 0.0, 0.0, 0.0]
    assert "per_frame" not in Aligner(features, fps).report.as_dict()  # off by default (the live recorder)
