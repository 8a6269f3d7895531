"""SequenceGaps: messages lost on the way to a subscription, from the publishers' sequence numbers."""

from __future__ import annotations

from lerobot_recorder.recorder.messages import SequenceGaps


def test_a_gap_in_one_publishers_sequence_is_the_number_of_messages_lost() -> None:
    gaps = SequenceGaps()
    assert gaps.lost("/j", b"A", 16) == 0  # the first one seen: nothing to compare with (volatile, joined late)
    assert gaps.lost("/j", b"A", 17) == 0
    assert gaps.lost("/j", b"A", 25) == 7
    # Two publishers on one topic, and one publisher's numbers on another topic, are counted apart.
    assert gaps.lost("/j", b"B", 3) == 0 and gaps.lost("/j", b"A", 26) == 0 and gaps.lost("/j", b"B", 5) == 1
    assert gaps.lost("/c", b"A", 100) == 0
    # A publisher that restarted (numbers go back) or a middleware without numbers counts nothing.
    assert gaps.lost("/j", b"A", 1) == 0 and gaps.lost("/j", b"A", 2) == 0
    assert gaps.lost("/j", b"A", None) == 0


def test_rclpy_message_info_is_read_as_it_comes() -> None:
    gaps = SequenceGaps()
    info = {"publication_sequence_number": 16, "publisher_gid": {"implementation_identifier": "x", "data": b"\x01"}}
    assert gaps.lost_from_info("/j", info) == 0
    assert gaps.lost_from_info("/j", {**info, "publication_sequence_number": 20}) == 3
    assert gaps.lost_from_info("/j", {"publication_sequence_number": None}) == 0
