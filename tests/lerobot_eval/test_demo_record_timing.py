"""Why `lerobot-ros demo record` records in lockstep on sim time (issue #19 item 5), without ROS.

The recorder samples its 30 fps frame grid on the stamps' clock: the newest observation stamped at or before
each frame time. A sim bridge in real time stamps wall time; on a busy machine its steps come late (a step
took 1.5-2.5 control periods at load 6-12), so the grid passes the same step twice and the expert's answer to an
observation arrives after the frame that should hold it. A demonstration recorded so depends on the load: a
default demo at load 12 had 30-50 % of its frames repeating the previous step and some labelled with the
answer to the previous observation (measured with the expert on the recorded observations). In lockstep the
bridge steps only once the expert answered and stamps simulated time, and the recorder runs on that clock:
one frame per step, each with the answer to its own observation, however late the steps come.

These tests drive the recorder's own `LiveSampler` with the message timing of such a machine.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from lerobot_contract.align import AlignFeature
from lerobot_contract.sampler import LiveSampler
from lerobot_contract.time import NS

FPS = 30
PERIOD_NS = NS // FPS
MS = 1_000_000
# The demo contract's age limits (config/contracts/so101_sim.yaml) and the recorder's latency window.
FEATURES = (
    AlignFeature("observation.state", max_age_ns=100 * MS),
    AlignFeature("observation.environment_state", max_age_ns=100 * MS),
    AlignFeature("action", max_age_ns=250 * MS),
)
LATENCY_NS = 150 * MS
# A busy machine: wall time each step takes (in control periods) and the expert's answer delay, repeating.
STEP_PERIODS = (1.0, 2.5, 1.0, 1.5, 2.0, 1.0)
ANSWER_DELAY_MS = (3, 40, 3, 200, 8, 3)
STEPS = 60


@dataclass(frozen=True)
class Message:
    receive_ns: int
    key: str
    stamp_ns: int
    step: int  # the sim step whose observation this is (for the action: the observation it answers)
    clock_ns: int  # the recorder's clock when it arrives (wall, or the newest /clock on sim time)


def busy_machine(sim_stamps: bool) -> list[Message]:
    """The bridge's observations and the expert's answers, in arrival order. Wall stamps: a real-time bridge
    that steps late and holds the previous command when the answer is late; sim stamps: a lockstep bridge that
    steps once the answer arrived (the recorder's clock is then the newest /clock, the newest step's time)."""
    messages = []
    wall = 1_000 * NS
    for step in range(STEPS):
        sim_ns = round(step * (NS / FPS))
        stamp = sim_ns if sim_stamps else wall
        clock = sim_ns if sim_stamps else None
        publish = wall + 5 * MS
        for key in ("observation.state", "observation.environment_state"):
            messages.append(Message(publish, key, stamp, step, clock if clock is not None else publish))
        answer = publish + ANSWER_DELAY_MS[step % len(ANSWER_DELAY_MS)] * MS
        messages.append(Message(answer, "action", stamp, step, clock if clock is not None else answer))
        next_wall = wall + round(STEP_PERIODS[step % len(STEP_PERIODS)] * PERIOD_NS)
        # Lockstep waits for the answer before the next step; real time does not.
        wall = max(next_wall, answer) if sim_stamps else next_wall
    return sorted(messages, key=lambda m: m.receive_ns)


def record(messages: list[Message]) -> list[dict[str, int]]:
    """The frames the recorder's sampler makes of these messages: per frame, the step each feature came from."""
    sampler = LiveSampler(FEATURES, FPS, latency_ns=LATENCY_NS)
    sampler.start(messages[0].clock_ns)
    frames = []
    for message in messages:
        sampler.push(message.key, message.stamp_ns, message.step, message.clock_ns)
        frames += sampler.poll(message.clock_ns)
    last = messages[-1].clock_ns
    frames += sampler.stop(last)
    return [{key: int(pick.sample.payload) for key, pick in frame.picks.items()} for frame in frames]


def test_real_time_recording_on_a_busy_machine_repeats_steps_and_mislabels_actions() -> None:
    """The cause: wall-stamped observations from a bridge that steps late make frames that repeat a step and
    frames whose action answers an earlier observation than the one they hold."""
    frames = record(busy_machine(sim_stamps=False))
    steps = [f["observation.state"] for f in frames]
    repeats = sum(1 for a, b in itertools.pairwise(steps) if a == b)
    mislabelled = sum(1 for f in frames if f["action"] != f["observation.state"])
    assert repeats > len(frames) // 4, (repeats, len(frames))
    assert mislabelled > 0


def test_lockstep_recording_on_sim_time_gives_one_frame_per_step_with_its_own_answer() -> None:
    """The fix: the same machine, the bridge in lockstep stamping sim time and the recorder on that clock."""
    frames = record(busy_machine(sim_stamps=True))
    assert [f["observation.state"] for f in frames] == list(range(len(frames)))
    assert len(frames) >= STEPS - 1  # every step but possibly the last (no later sample releases it)
    assert all(f["action"] == f["observation.state"] == f["observation.environment_state"] for f in frames)
