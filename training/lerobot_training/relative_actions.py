"""Relative actions: a policy predicts `action - state` for chosen joints, the state of the observation it saw.

Training turns every action window into offsets from the state at the window's frame (the same state for
the whole chunk, as openpi's DeltaActions and LeRobot's `relative_actions_processor` do); inference adds the
state of the observation the chunk was computed from back. The joints are matched by name between the
action and `observation.state`; by default every action joint except the gripper is relative (LeRobot's
`relative_exclude_joints=["gripper"]`), because a gripper command is an open/close level, not a motion.

The choice is stored in the checkpoint's `lerobot_ros.json` under `relative_actions` (`RelativeActions.to_json`),
so config.json stays what LeRobot reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_training.errors import CheckpointError, FeatureMismatchError

STATE_KEY = "observation.state"
DEFAULT_EXCLUDE = ("gripper",)  # LeRobot's relative_exclude_joints default
METADATA_KEY = "relative_actions"


def _joint_of(name: str) -> str:
    """`shoulder_pan.pos` -> `shoulder_pan` (LeRobot's `<motor>.pos` element names)."""
    return name.rsplit(".", 1)[0] if "." in name else name


def _match(joint: str, names: Sequence[str]) -> int | None:
    """Index of the element named `joint` (exactly, or as `<joint>.<suffix>`), None when absent."""
    for index, name in enumerate(names):
        if joint in (name, _joint_of(name)):
            return index
    return None


@dataclass(frozen=True)
class RelativeActions:
    """Which action elements are offsets from which state elements.

    `action_indices[i]` of the action is predicted relative to `state_indices[i]` of `state_key`;
    `joints` are their action names.
    """

    joints: tuple[str, ...]
    action_indices: tuple[int, ...]
    state_indices: tuple[int, ...]
    action_dim: int
    state_key: str = STATE_KEY

    def __post_init__(self) -> None:
        if not (len(self.joints) == len(self.action_indices) == len(self.state_indices)):
            raise ValueError("joints, action_indices and state_indices must have the same length")
        if not self.joints:
            raise ValueError("joints: relative actions need at least one joint")
        if len(set(self.action_indices)) != len(self.action_indices):
            raise ValueError(f"joints: an action element is named twice ({list(self.joints)})")
        if any(not 0 <= i < self.action_dim for i in self.action_indices):
            raise ValueError(f"action_indices {list(self.action_indices)} outside the action's {self.action_dim}")
        if any(i < 0 for i in self.state_indices):
            raise ValueError(f"state_indices must be >= 0, got {list(self.state_indices)}")

    @classmethod
    def choose(
        cls,
        action_names: Sequence[str] | None,
        state_names: Sequence[str] | None,
        joints: Sequence[str] = (),
        *,
        state_key: str = STATE_KEY,
        option: str = "--relative-actions",
    ) -> RelativeActions:
        """The joints named in `joints` (all but the gripper when empty), matched in the action and the state.

        Raises FeatureMismatchError with one line naming the unknown joint or the missing names.
        """
        if not action_names:
            raise FeatureMismatchError(
                f"{option}: the dataset's action has no element names (meta/info.json features.action.names), "
                "so its joints cannot be matched with the state"
            )
        actions = list(action_names)
        if joints:
            indices = []
            for joint in joints:
                index = _match(joint, actions)
                if index is None:
                    raise FeatureMismatchError(
                        f"{option}: {joint!r} is not an action joint of this dataset (its action names: "
                        f"{', '.join(actions)})"
                    )
                indices.append(index)
        else:
            indices = [i for i, name in enumerate(actions) if not any(t in name.lower() for t in DEFAULT_EXCLUDE)]
            if not indices:
                raise FeatureMismatchError(f"{option}: every action joint is a gripper; name the joints to use")
        state_indices = []
        for index in indices:
            name = actions[index]
            if state_names:
                found = _match(name, list(state_names))
                if found is None:
                    found = _match(_joint_of(name), list(state_names))
                if found is None:
                    raise FeatureMismatchError(
                        f"{option}: action joint {name!r} has no element of that name in {state_key!r} (its names: "
                        f"{', '.join(state_names)}); relative actions are action - state of the same joint"
                    )
                state_indices.append(found)
            else:
                raise FeatureMismatchError(
                    f"{option}: {state_key!r} has no element names, so action joint {name!r} cannot be matched "
                    "with its state"
                )
        order = sorted(range(len(indices)), key=lambda k: indices[k])
        return cls(
            joints=tuple(actions[indices[k]] for k in order),
            action_indices=tuple(indices[k] for k in order),
            state_indices=tuple(state_indices[k] for k in order),
            action_dim=len(actions),
            state_key=state_key,
        )

    def _check(self, actions: npt.NDArray[Any], state: npt.NDArray[Any]) -> None:
        if actions.shape[-1] != self.action_dim:
            raise FeatureMismatchError(
                f"relative actions: the actions have {actions.shape[-1]} elements, the checkpoint's action "
                f"{self.action_dim}"
            )
        if state.shape[-1] <= max(self.state_indices):
            raise FeatureMismatchError(
                f"relative actions: {self.state_key!r} has {state.shape[-1]} elements, the joints need index "
                f"{max(self.state_indices)}"
            )

    def to_relative(self, actions: npt.NDArray[Any], state: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """`actions` (..., T, A) or (A,) minus the reference `state` (..., S) on the relative joints (a copy)."""
        return self._shift(actions, state, -1.0)

    def to_absolute(self, actions: npt.NDArray[Any], state: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """Inverse of `to_relative`: offsets plus the reference `state` on the relative joints (a copy)."""
        return self._shift(actions, state, 1.0)

    def _shift(self, actions: npt.NDArray[Any], state: npt.NDArray[Any], sign: float) -> npt.NDArray[np.float64]:
        actions, state = np.asarray(actions), np.asarray(state)
        self._check(actions, state)
        out = np.array(actions, dtype=np.float64)
        reference = np.asarray(state, dtype=np.float64)[..., list(self.state_indices)]
        if out.ndim > reference.ndim:
            reference = reference[..., None, :]
        out[..., list(self.action_indices)] += sign * reference
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "state_key": self.state_key,
            "joints": list(self.joints),
            "action_indices": list(self.action_indices),
            "state_indices": list(self.state_indices),
            "action_dim": self.action_dim,
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> RelativeActions:
        """The `relative_actions` entry of lerobot_ros.json; CheckpointError naming `where` when malformed."""
        if not isinstance(data, Mapping):
            raise CheckpointError(f"{where}: {METADATA_KEY!r} must be an object")
        try:
            return cls(
                joints=tuple(str(j) for j in data["joints"]),
                action_indices=tuple(int(i) for i in data["action_indices"]),
                state_indices=tuple(int(i) for i in data["state_indices"]),
                action_dim=int(data["action_dim"]),
                state_key=str(data.get("state_key", STATE_KEY)),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{where}: {METADATA_KEY!r} is malformed ({type(err).__name__}: {err})") from None


def window_offsets(
    relative: RelativeActions,
    actions: npt.NDArray[Any],
    states: npt.NDArray[Any],
    offsets: Sequence[int],
) -> npt.NDArray[np.float64]:
    """Every training target of one episode: for each frame t and offset k inside the episode,
    `action[t + k]` relative to `state[t]`, as rows (the values the normaliser sees); (n, A)."""
    actions, states = np.asarray(actions), np.asarray(states)
    length = len(actions)
    rows = []
    for k in offsets:
        frames = np.arange(max(0, -k), min(length, length - k))
        if len(frames):
            rows.append(relative.to_relative(actions[frames + k], states[frames]))
    if not rows:
        return np.zeros((0, relative.action_dim))
    return np.concatenate(rows)
