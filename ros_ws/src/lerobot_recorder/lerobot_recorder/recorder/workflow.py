"""The episode workflow of `lerobot-record`, as a pure state machine driven by plain times (seconds).

States: idle -> recording -> saving -> resetting -> recording -> ... -> stopped (or error).

* A *session* (`begin_session`, what `lerobot-record` does) records `num_episodes` episodes of
  `episode_time_s` each, with a `reset_time_s` pause between them (none after the last one).
* A *single episode* (`request_episode`, the RecordEpisode action) records one episode, saves it and goes back
  to idle; the caller resets the scene.
* Controls, as LeRobot's keys: `next` (right arrow) ends the episode early and saves it, or ends the reset
  early; `rerecord` (left arrow) discards the episode, resets, and records it again; `stop` (Esc) saves the
  episode being recorded and stops.

The workflow only decides; it returns `Command`s (start/save/discard an episode) for the caller to carry out,
and the caller reports back with `saved` / `save_failed`.

The caller also says why no episode can start now (`waiting_for`: a contract topic that has gone silent). A
session's next episode then waits in the resetting state with that reason as its message, and starts as soon as
the reason is gone; after `topic_wait_s` of waiting the session stops in the error state (saved episodes stay
as they are). An episode asked for (`begin_session`, `request_episode`) is refused with the reason instead.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from lerobot_recorder.recorder.errors import WorkflowError


class State(enum.IntEnum):
    """Workflow states (values match lerobot_msgs/RecorderStatus)."""

    IDLE = 0
    RECORDING = 1
    SAVING = 2
    RESETTING = 3
    STOPPED = 4
    ERROR = 5


class Action(enum.Enum):
    """What the caller must do to the dataset."""

    START = "start"
    SAVE = "save"
    DISCARD = "discard"


@dataclass(frozen=True)
class Command:
    """One thing to do: start an episode of `task`, or save / discard the open one."""

    action: Action
    task: str = ""


@dataclass(frozen=True)
class WorkflowConfig:
    """`lerobot-record`'s timing parameters."""

    episode_time_s: float = 60.0
    reset_time_s: float = 60.0
    num_episodes: int = 50
    topic_wait_s: float = 60.0  # how long a session's next episode waits for `waiting_for` to clear

    def __post_init__(self) -> None:
        if not (self.episode_time_s > 0 and math.isfinite(self.episode_time_s)):
            raise ValueError(f"episode_time_s must be a positive number, got {self.episode_time_s}")
        if not (self.reset_time_s >= 0 and math.isfinite(self.reset_time_s)):
            raise ValueError(f"reset_time_s must be >= 0, got {self.reset_time_s}")
        if self.num_episodes < 1:
            raise ValueError(f"num_episodes must be >= 1, got {self.num_episodes}")
        if not (self.topic_wait_s >= 0 and math.isfinite(self.topic_wait_s)):
            raise ValueError(f"topic_wait_s must be >= 0, got {self.topic_wait_s}")


def validate_task(task: str) -> str:
    """The task text, or ValueError when it cannot name an episode (empty, or control characters)."""
    if not task.strip():
        raise ValueError("the task is empty; give a short description of what the episode shows (task:=...)")
    bad = sorted({f"U+{ord(c):04X}" for c in task if (ord(c) < 32 and c not in "\t") or ord(c) == 127})
    if bad:
        raise ValueError(f"the task contains control characters ({', '.join(bad)}); use printable text on one line")
    return task


class EpisodeWorkflow:
    """The state machine (see the module docstring). Times are seconds on any monotonic clock."""

    def __init__(self, config: WorkflowConfig, now: float | None = None) -> None:
        self.config = config
        self.state = State.IDLE
        self.task = ""
        self.episode_task = ""
        self.message = ""
        self.saved_in_session = 0
        # Why no episode can start now (set by the caller, e.g. a silent topic); "" when one can.
        self.waiting_for = ""
        self._session = False
        self._duration_s = config.episode_time_s
        self._since = now  # None: the first state's start is not known (a clock not running yet)
        self._stop_after_save = False
        self._rerecord = False
        self._held_since: float | None = None

    def elapsed(self, now: float) -> float:
        """Seconds spent in the current state (0 in the first state when the workflow was made without a time)."""
        return 0.0 if self._since is None else max(0.0, now - self._since)

    @property
    def duration_s(self) -> float:
        """Length of the episode being recorded."""
        return self._duration_s

    @property
    def in_session(self) -> bool:
        """True while a `begin_session` run is going on."""
        return self._session

    def _enter(self, state: State, now: float) -> None:
        self.state = state
        self._since = now

    def _start(self, now: float, task: str | None = None) -> list[Command]:
        self.episode_task = self.task if task is None else task
        self._held_since = None
        self.message = ""  # what the status said was about the previous episode
        self._enter(State.RECORDING, now)
        return [Command(Action.START, self.episode_task)]

    def _refuse_while_waiting(self) -> None:
        if self.waiting_for:
            raise WorkflowError(f"{self.waiting_for}; no episode can start until it delivers again")

    def _next_in_session(self, now: float) -> list[Command]:
        """Start the session's next episode, or hold it (resetting) while `waiting_for` says why it cannot start;
        after `topic_wait_s` of holding, the session stops in the error state."""
        if not self.waiting_for:
            return self._start(now)
        if self._held_since is None:
            self._held_since = now
            if self.state is not State.RESETTING:
                self._enter(State.RESETTING, now)
        waited = now - self._held_since
        if waited >= self.config.topic_wait_s:
            return self.fail(
                f"{self.waiting_for}; recording stopped after waiting {waited:.1f} s for it (topic_wait_s), "
                "the saved episodes are intact",
                now,
            )
        self.message = f"{self.waiting_for}; the next episode starts when it delivers again"
        return []

    def begin_session(self, task: str, now: float) -> list[Command]:
        """Start recording `num_episodes` episodes of `task` (from idle)."""
        if self.state not in (State.IDLE, State.STOPPED):
            raise WorkflowError(f"cannot start a session while {self.state.name.lower()}")
        self._refuse_while_waiting()
        self.task = validate_task(task)
        self._session = True
        self.saved_in_session = 0
        self._duration_s = self.config.episode_time_s
        self._stop_after_save = False
        self.message = ""
        return self._start(now)

    def request_episode(self, task: str, duration_s: float, now: float) -> list[Command]:
        """Record one episode of `task` for `duration_s` (<= 0: episode_time_s), then save it and go idle.

        `task` applies to this episode only; the session task (`task`) stays.
        """
        if self.state not in (State.IDLE, State.STOPPED):
            raise WorkflowError(
                f"the recorder is {self.state.name.lower()}; episodes can be requested only when it is idle"
            )
        validate_task(task)
        self._refuse_while_waiting()
        self._session = False
        self._duration_s = duration_s if duration_s > 0 and math.isfinite(duration_s) else self.config.episode_time_s
        self._stop_after_save = False
        self.message = ""
        return self._start(now, task)

    def set_task(self, task: str) -> None:
        """Change the task of the next episodes (the one being recorded keeps its task)."""
        self.task = validate_task(task)

    def tick(self, now: float) -> list[Command]:
        """Time-driven transitions: end of an episode, end of a reset."""
        if self.state is State.RECORDING and self.elapsed(now) >= self._duration_s:
            return self._end_episode(now)
        if self.state is State.RESETTING and self.elapsed(now) >= self.config.reset_time_s:
            return self._after_reset(now)
        return []

    def next(self, now: float) -> list[Command]:
        """Right arrow: save the episode now, or end the reset now."""
        if self.state is State.RECORDING:
            return self._end_episode(now)
        if self.state is State.RESETTING:
            return self._after_reset(now)
        return []

    def rerecord(self, now: float) -> list[Command]:
        """Left arrow: discard the episode being recorded (or just saved's successor), reset, record it again."""
        if self.state is not State.RECORDING:
            return []
        if not self._session:
            self._enter(State.IDLE, now)
            self.message = "episode discarded (re-record requested)"
            return [Command(Action.DISCARD)]
        self._rerecord = True
        self._enter(State.RESETTING, now)
        return [Command(Action.DISCARD)]

    def stop(self, now: float) -> list[Command]:
        """Esc: save the episode being recorded, then stop."""
        if self.state is State.RECORDING:
            self._stop_after_save = True
            self._enter(State.SAVING, now)
            return [Command(Action.SAVE)]
        if self.state is State.SAVING:
            self._stop_after_save = True
            return []
        if self.state in (State.RESETTING, State.IDLE):
            self._finish(now)
        return []

    def discard(self, reason: str, now: float) -> list[Command]:
        """Drop the episode being recorded because of a problem (e.g. a clock jump); the session goes on."""
        if self.state is not State.RECORDING:
            return []
        self.message = reason
        return self.rerecord(now)

    def saved(self, now: float) -> list[Command]:
        """The caller committed the episode."""
        if self.state is not State.SAVING:
            raise WorkflowError(f"saved() while {self.state.name.lower()}")
        self.saved_in_session += 1
        if self._stop_after_save:
            self._finish(now)
            return []
        if not self._session:
            self._enter(State.IDLE, now)
            return []
        if self.saved_in_session >= self.config.num_episodes:
            self._finish(now)
            return []
        if self.config.reset_time_s <= 0:
            return self._next_in_session(now)
        self._enter(State.RESETTING, now)
        return []

    def save_failed(self, message: str, now: float, fatal: bool) -> list[Command]:
        """The commit failed: the episode is lost; `fatal` (disk full) stops recording in the error state."""
        self.message = message
        if fatal or self.state is not State.SAVING:
            return self.fail(message, now)
        if not self._session or self._stop_after_save:
            self._enter(State.IDLE if not self._session else State.STOPPED, now)
            self._session = False
            return []
        self._rerecord = True
        self._enter(State.RESETTING, now)
        return []

    def fail(self, message: str, now: float) -> list[Command]:
        """A problem that stops recording (disk full, dataset unusable); discards an open episode."""
        commands = [Command(Action.DISCARD)] if self.state is State.RECORDING else []
        self.message = message
        self._session = False
        self._enter(State.ERROR, now)
        return commands

    def _end_episode(self, now: float) -> list[Command]:
        self._enter(State.SAVING, now)
        return [Command(Action.SAVE)]

    def _after_reset(self, now: float) -> list[Command]:
        self._rerecord = False
        return self._next_in_session(now)

    def _finish(self, now: float) -> None:
        self._session = False
        self._stop_after_save = False
        self._enter(State.STOPPED, now)
