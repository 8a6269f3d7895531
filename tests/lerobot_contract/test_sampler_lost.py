"""LiveSampler: messages lost before they reached it (sequence gaps) are counted, never silently missing frames.

The recorder once saved 13 frames of a 1 s episode's 29 slots at 30 fps under load, 0 dropped: its joint queue
(depth 30, 0.3 s at 100 Hz) overflowed around the episode start, frame 0 waited for the first joint state it did
receive, and the slots before it were neither saved nor counted.
"""

from __future__ import annotations

from lerobot_contract.align import AlignFeature, frame_time
from lerobot_contract.sampler import LiveSampler

MS = 1_000_000
FPS = 10


def make() -> LiveSampler:
    return LiveSampler([AlignFeature("joints"), AlignFeature("cam")], fps=FPS, latency_ns=50 * MS)


def record(lost_joints: range) -> tuple[LiveSampler, list[int], int]:
    """Joints at 100 Hz and the camera at 50 Hz from 0 s, delivered 1 ms after their stamps; the joint states
    stamped in `lost_joints` (ms) never arrive, and the next one says how many were lost (as the publisher's
    sequence numbers do). An episode from 1.006 s (the recorder's clock) to 2.006 s. Returns the sampler, the kept
    frames' times (ms after the start on the stamps' clock) and the number of grid slots from the start to the end."""
    s = make()
    start, end = None, 2006 * MS
    lost, frames = 0, []
    for t in range(0, 2200, 10):
        if t == 1010:
            start = s.start(1006 * MS)
            assert start == 1005 * MS  # the offset: 1 ms
        if t in lost_joints:
            lost += 1
        else:
            s.push("joints", t * MS, t, receive_ns=(t + 1) * MS, lost=lost)
            lost = 0
        if t % 20 == 0:
            s.push("cam", t * MS, t, receive_ns=(t + 1) * MS)
        frames += s.poll((t + 1) * MS, end if start is not None else None)
    assert start is not None and s.can_end(2200 * MS, end)
    frames += [*s.poll(2200 * MS, end), *s.stop(end)]
    assert s.report.t0_ns is not None
    t0 = s.report.t0_ns
    slots = sum(start <= frame_time(t0, k, FPS) <= start + NS_EPISODE for k in range(-2 * FPS, 2 * FPS))
    return s, [(f.time_ns - start) // MS for f in frames], slots


NS_EPISODE = 1000 * MS


def test_without_loss_every_slot_from_the_start_is_a_frame() -> None:
    s, kept, slots = record(range(0))
    assert kept == list(range(15, 1000, 100)) and slots == 10  # frame 0: the first image after the start
    assert s.live.frames_dropped_lost == 0 and s.live.lost_by_feature == {}


def test_joint_states_lost_across_the_start_count_the_slots_before_frame_0_as_dropped() -> None:
    s, kept, slots = record(range(950, 1400))  # 45 joint states lost: 50 ms before the start to 400 ms after
    assert kept[0] == 395  # frame 0 at 1.4 s: the first joint state received
    assert s.live.lost_by_feature == {"joints": 45}
    # The slots at 1.1, 1.2, 1.3 s had data at the publishers (from 1.02 s on): dropped and counted.
    assert s.live.frames_dropped_lost == 3
    assert len(kept) + s.live.frames_dropped_lost + s.report.frames_dropped == slots == 10


def test_messages_lost_before_the_start_or_inside_the_episode_cost_no_slot() -> None:
    s, kept, slots = record(range(500, 1000))  # lost before the start: the first one after it is on time
    assert kept[0] == 15 and len(kept) == slots and s.live.frames_dropped_lost == 0
    assert s.live.lost_by_feature == {}  # not in this episode
    s, kept, slots = record(range(1300, 1500))  # inside: frames hold the newest joint state received
    assert len(kept) == slots and s.live.frames_dropped_lost == 0
    assert s.live.lost_by_feature == {"joints": 20}
