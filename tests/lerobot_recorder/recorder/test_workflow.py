"""The lerobot-record episode workflow without a graph: sessions, single episodes, keys, failures."""

from __future__ import annotations

import pytest

from lerobot_recorder.recorder import WorkflowError
from lerobot_recorder.recorder.workflow import EpisodeWorkflow, State, WorkflowConfig, validate_task
from lerobot_ros.terminal_keys import Control, KeyDecoder


def actions(commands: list) -> list[str]:
    return [c.action.value for c in commands]


def test_session_records_num_episodes_with_resets_between() -> None:
    wf = EpisodeWorkflow(WorkflowConfig(episode_time_s=2, reset_time_s=1, num_episodes=2))
    assert actions(wf.begin_session("pick", 0.0)) == ["start"]
    assert wf.tick(1.9) == [] and wf.state is State.RECORDING
    assert actions(wf.tick(2.0)) == ["save"] and wf.state is State.SAVING
    assert wf.saved(2.5) == [] and wf.state is State.RESETTING
    assert wf.tick(3.4) == []
    assert actions(wf.tick(3.5)) == ["start"]
    assert actions(wf.tick(5.5)) == ["save"]
    assert wf.saved(6.0) == [] and wf.state is State.STOPPED  # no reset after the last episode
    assert wf.saved_in_session == 2


def test_keys_next_rerecord_stop() -> None:
    wf = EpisodeWorkflow(WorkflowConfig(episode_time_s=60, reset_time_s=60, num_episodes=5))
    wf.begin_session("pick", 0.0)
    assert actions(wf.next(1.0)) == ["save"]
    wf.saved(1.1)
    assert actions(wf.next(2.0)) == ["start"]  # right arrow ends the reset
    assert actions(wf.rerecord(3.0)) == ["discard"] and wf.state is State.RESETTING
    assert actions(wf.next(3.5)) == ["start"]
    assert wf.saved_in_session == 1  # the re-recorded episode did not count
    assert actions(wf.stop(4.0)) == ["save"]  # Esc saves the episode being recorded, then stops
    assert wf.saved(4.2) == [] and wf.state is State.STOPPED


def test_single_episode_goal_and_task_change() -> None:
    wf = EpisodeWorkflow(WorkflowConfig(episode_time_s=10, reset_time_s=5, num_episodes=1))
    wf.set_task("session task")
    assert [c.task for c in wf.request_episode("stack", 1.5, 0.0)] == ["stack"]
    assert wf.task == "session task" and wf.episode_task == "stack"
    with pytest.raises(WorkflowError, match="idle"):
        wf.request_episode("again", 1.0, 0.1)
    wf.set_task("next task")
    assert wf.task == "next task"
    assert actions(wf.tick(1.5)) == ["save"]
    wf.saved(1.6)
    assert wf.state is State.IDLE
    assert actions(wf.request_episode("x", 0.0, 2.0)) == ["start"] and wf.duration_s == 10


def test_failures() -> None:
    wf = EpisodeWorkflow(WorkflowConfig(episode_time_s=1, reset_time_s=0, num_episodes=3))
    wf.begin_session("pick", 0.0)
    wf.tick(1.0)
    assert wf.save_failed("encoder crashed", 1.1, fatal=False) == []
    assert wf.state is State.RESETTING  # the lost episode is recorded again
    assert actions(wf.tick(1.2)) == ["start"]
    assert actions(wf.fail("disk full", 1.3)) == ["discard"]
    assert wf.state is State.ERROR and wf.message == "disk full"


@pytest.mark.parametrize("task", ["", "   ", "two\nlines", "bell\x07"])
def test_bad_tasks_are_refused(task: str) -> None:
    with pytest.raises(ValueError, match="task"):
        validate_task(task)


def test_odd_but_printable_tasks_are_fine() -> None:
    assert validate_task("Pick the 'red' cube → bin #2 (ü, 日本, \"q\"), 100%\t!").startswith("Pick")


def test_key_decoder_arrows_letters_and_lone_escape() -> None:
    keys = KeyDecoder()
    assert keys.feed(b"\x1b[C\x1b[Dnrq") == [
        Control.NEXT,
        Control.RERECORD,
        Control.NEXT,
        Control.RERECORD,
        Control.STOP,
    ]
    assert keys.feed(b"\x1b") == [] and keys.pending_escape
    assert keys.flush() == [Control.STOP]
    assert keys.feed(b"\x1bOC\x1b[1;5Cx") == [Control.NEXT]  # SS3 arrow; Ctrl-arrow and other keys ignored
    assert keys.feed(b"\x1b\x1b[C") == [Control.STOP, Control.NEXT]


def test_keys_typed_before_the_terminal_switch_are_kept() -> None:
    """A key pressed while the keyboard node still starts up (CI under load: the test's left arrow was lost)."""
    import os
    import pty
    import select

    from lerobot_ros.terminal_keys import cbreak

    master, slave = pty.openpty()
    try:
        os.write(master, b"\x1b[D")
        with cbreak(slave):
            ready, _, _ = select.select([slave], [], [], 5.0)
            assert ready and os.read(slave, 64) == b"\x1b[D"
    finally:
        os.close(master)
        os.close(slave)
