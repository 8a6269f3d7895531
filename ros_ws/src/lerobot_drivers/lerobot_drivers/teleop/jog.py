"""Joint jogging: targets that move by a step per key press or by a velocity per tick, within limits.

`JogKeys` turns terminal bytes into jog actions: ``1``..``6`` select a joint, ``w``/``+``/``=`` and
``s``/``-`` move it by one step, ``]``/``[`` double/halve the step, ``0`` puts every target back at the
measured position. Bytes inside escape sequences (arrow keys, which the recorder's keys use) are skipped
with the recorder's own decoder, so one keyboard serves both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lerobot_ros.terminal_keys import ESC, Control, KeyDecoder

FloatArray = npt.NDArray[np.float64]

JOG_HELP = "1-6: select joint | w/+ s/-: move it one step | ] [: double/halve the step | 0: targets := measured"


@dataclass(frozen=True)
class JogAction:
    """One jog key: `kind` is select (value = joint index), move (value = +1/-1), scale (value = factor) or resync."""

    kind: str
    value: float = 0.0


KEYS: dict[int, JogAction] = {
    **{ord(str(i + 1)): JogAction("select", i) for i in range(9)},
    ord("w"): JogAction("move", 1),
    ord("+"): JogAction("move", 1),
    ord("="): JogAction("move", 1),
    ord("s"): JogAction("move", -1),
    ord("-"): JogAction("move", -1),
    ord("]"): JogAction("scale", 2.0),
    ord("["): JogAction("scale", 0.5),
    ord("0"): JogAction("resync"),
}


class JogKeys:
    """Decodes terminal bytes into (recorder controls, jog actions)."""

    def __init__(self) -> None:
        self.recorder_keys = KeyDecoder()

    def feed(self, data: bytes) -> tuple[list[Control], list[JogAction]]:
        controls: list[Control] = []
        actions: list[JogAction] = []
        for byte in data:
            in_sequence = self.recorder_keys.pending_escape or byte == ESC
            controls.extend(self.recorder_keys.feed(bytes([byte])))
            if not in_sequence and byte in KEYS:
                actions.append(KEYS[byte])
        return controls, actions

    def flush(self) -> list[Control]:
        """A lone ESC after a pause is the recorder's stop key."""
        controls: list[Control] = self.recorder_keys.flush()
        return controls


class JointJog:
    """Targets for `joint_names`, starting at the measured position, kept within [lower, upper]."""

    def __init__(self, joint_names: Sequence[str], step: float, lower: Sequence[float], upper: Sequence[float]) -> None:
        if step <= 0:
            raise ValueError(f"step must be > 0 rad, got {step}")
        if not len(joint_names) == len(lower) == len(upper):
            raise ValueError("joint_names, lower and upper must have the same length")
        self.joint_names = tuple(joint_names)
        self.step = step
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.selected = 0
        self.targets: FloatArray | None = None
        self.measured: FloatArray | None = None

    def measure(self, positions: Sequence[float]) -> None:
        """The arm's position; the first one becomes the targets (nothing moves before a key)."""
        self.measured = np.asarray(positions, dtype=np.float64)
        if self.targets is None:
            self.targets = np.clip(self.measured.copy(), self.lower, self.upper)

    def apply(self, action: JogAction) -> str:
        """Apply a key; returns a one-line description for the user."""
        if action.kind == "select":
            index = int(action.value)
            if index >= len(self.joint_names):
                return f"no joint {index + 1}: this arm has {len(self.joint_names)}"
            self.selected = index
            return f"selected {self.joint_names[index]}"
        if action.kind == "scale":
            self.step *= action.value
            return f"step {self.step:.4f} rad"
        if self.targets is None:
            return "no joint_states yet: waiting for the arm"
        if action.kind == "resync" and self.measured is not None:
            self.targets = np.clip(self.measured.copy(), self.lower, self.upper)
            return "targets := measured position"
        if action.kind == "move":
            return self.move(self.selected, action.value * self.step)
        return ""

    def move(self, index: int, delta: float) -> str:
        """Move one joint's target by `delta` rad (clipped to its limits)."""
        if self.targets is None:
            return "no joint_states yet: waiting for the arm"
        self.targets[index] = np.clip(self.targets[index] + delta, self.lower[index], self.upper[index])
        return f"{self.joint_names[index]} -> {self.targets[index]:+.3f} rad"

    def move_all(self, deltas: FloatArray) -> None:
        """Move every target by `deltas` (velocity jogging: velocity * dt), clipped to the limits."""
        if self.targets is not None:
            self.targets = np.clip(self.targets + deltas, self.lower, self.upper)
