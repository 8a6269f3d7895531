"""Regression tests for what the fuzzers found, one concrete input each (see bench/results/reliability_findings.md)."""

from __future__ import annotations

import pytest
from fuzz_targets import NS, RecorderMessages
from rosbags.serde import SerdeError

from lerobot_contract import MessageMismatchError
from lerobot_contract.align import AlignedFrame, Pick, Sample
from lerobot_contract.frames import FrameDecoder


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> RecorderMessages:
    target = RecorderMessages()
    target.setup(tmp_path_factory.mktemp("recorder"))
    return target


def test_a_malformed_image_is_a_bad_frame_not_a_dead_sink_thread(recorder: RecorderMessages) -> None:
    """recorder_messages seed 7: a truncated Image CDR raised SerdeError in the sink thread, which then died."""
    _, _, image = next(m for m in recorder.messages() if m[0].startswith("/cameras"))
    raw = bytes(recorder.store.serialize_cdr(image, image.__msgtype__))
    values = FrameDecoder(recorder.contract, recorder.store.deserialize_cdr, deserialize_errors=(SerdeError,))
    key = "observation.images.front"
    frame = AlignedFrame(0, 1_700_000_000 * NS, {key: Pick(Sample(1_700_000_000 * NS, 1, raw[: len(raw) // 2]))})
    with pytest.raises(MessageMismatchError, match="cannot be deserialized"):
        values.build(frame)
    good = AlignedFrame(1, 1_700_000_000 * NS, {key: Pick(Sample(1_700_000_000 * NS, 2, raw))})
    assert values.build(good)[key].shape == (8, 8, 3)


def test_a_topic_name_with_a_line_break_still_gives_a_one_line_error() -> None:
    """bag_metadata seed 2 input 3508: metadata listing a topic named "\\n" made "has no topic" a two-line error."""
    from fuzz_harness import reproduce
    from test_fuzz import TARGETS

    outcome, _, detail = reproduce(TARGETS["bag_metadata"], 2, 3508)
    assert outcome == "clear_error", detail
    assert "(topics: \\n, /follower/joint_commands" in detail


@pytest.mark.parametrize("index", [2881, 784])
def test_a_joint_value_beyond_float32_is_refused_not_written_as_inf(index: int) -> None:
    """bag_storage seed 2 inputs 2881 and 784: a bit flip made a position finite in float64 (~1e39) but inf once cast
    to the dataset's float32; bag2dataset wrote the frame with inf."""
    from fuzz_harness import reproduce
    from test_fuzz import TARGETS

    outcome, _, detail = reproduce(TARGETS["bag_storage"], 2, index)
    assert outcome in ("ok", "changed", "clear_error"), detail


@pytest.mark.parametrize("index", [84, 540, 4160, 5762])
def test_one_message_stamped_up_to_a_second_ahead_costs_no_frames(recorder: RecorderMessages, index: int) -> None:
    """recorder_messages seed 2 (44 of 10,000 inputs): one message stamped sec+1 (up to 1 s ahead of the clock,
    within clock_jump_s) was taken; its topic's later samples were then refused as out of order (84: 7 frames of
    14 kept; 4160 and 5762, where it was the first or second message: 0), or one more than 1 s back of it ended
    the episode as a clock reset (540). Now it is refused as "future" and the episode keeps its frames."""
    from fuzz_harness import classify

    outcome, described, detail = classify(recorder, 2, index)
    assert outcome == "ok", f"{described}: {detail}"
    assert recorder.episode(None)[0] == recorder.reference


@pytest.mark.parametrize("index", [111, 118, 143])
def test_a_message_count_that_is_not_a_number_is_a_clear_error(index: int) -> None:
    """bag_metadata seed 1: metadata.yaml with a topic's message_count turned into a string ('41') made the reader
    add it to an int (TypeError) while it counted the topic's messages per type."""
    from fuzz_harness import reproduce
    from test_fuzz import TARGETS

    outcome, _, detail = reproduce(TARGETS["bag_metadata"], 1, index)
    assert outcome == "clear_error", detail
    assert "message_count" in detail


@pytest.mark.parametrize("index", [31, 45, 668])
def test_a_non_finite_observation_value_is_refused_not_answered_with_a_non_finite_chunk(index: int) -> None:
    """policy_server_frames seed 1: a Predict request whose state held NaN or inf was served, and the server
    answered a chunk with NaN/inf actions (the policy computed on them)."""
    from fuzz_harness import reproduce
    from test_fuzz import TARGETS

    outcome, _, detail = reproduce(TARGETS["policy_server_frames"], 1, index)
    assert outcome == "clear_error", detail
    assert "INVALID_ARGUMENT: observation 'observation.state' holds non-finite values" in detail


@pytest.mark.parametrize(("index", "expected"), [(18, "ok"), (30, "clear_error")])
def test_an_episode_ended_by_a_silent_topic_before_any_frame_is_not_called_saved(index: int, expected: str) -> None:
    """recorder_dead_sensors seed 1 (53 of 300 inputs): a topic stopped before an episode's first frame; the log and
    the status said "episode N ended early and saved", then the save found no frames and nothing was saved (18:
    the episode was recorded again; 30: the camera never came back and the session stopped)."""
    from fuzz_harness import reproduce
    from test_fuzz import TARGETS

    outcome, _, detail = reproduce(TARGETS["recorder_dead_sensors"], 1, index)
    assert outcome == expected, detail


def test_samples_refused_before_an_episode_and_taken_in_it_do_not_crash_the_sampler() -> None:
    """recorder_dead_sensors seed 2 input 420: samples refused as "future" before an episode started were taken
    in it once the clock estimate was lowered; their refusal was uncounted from the episode's counters, which the
    start had reset: KeyError 'future' out of the recorder's message callback."""
    from fuzz_harness import reproduce
    from test_fuzz import TARGETS

    outcome, _, detail = reproduce(TARGETS["recorder_dead_sensors"], 2, 420)
    assert outcome in ("ok", "clear_error"), detail


def test_a_topic_stamped_a_second_ahead_for_a_while_does_not_make_the_session_record_empty_episodes_for_ever() -> None:
    """recorder_dead_sensors seed 3 input 844: the joint states are stamped 1.0 s ahead for the first 3 s, then on
    the recorder's clock again; the clock estimate stays 1 s ahead, no sample reaches an episode, each episode is
    discarded for having no frames and recorded again, and the session never ended (a hang of the fuzz harness).
    The session now stops in the error state after EMPTY_EPISODES_LIMIT empty episodes in a row. (The estimate
    that never rises again, LiveSampler's StampClock, is not changed: the episodes are still empty.)"""
    from fuzz_harness import run_target
    from fuzz_recorder_session import remove_stale_session_dirs
    from test_fuzz import TARGETS

    try:
        counts = run_target(TARGETS["recorder_dead_sensors"], 1, seed=3, start=844, budget_s=10.0, max_hangs=1)
    finally:
        remove_stale_session_dirs()
    assert counts.counts["hang"] == 0 and counts.counts["clear_error"] == 1, counts.summary()
