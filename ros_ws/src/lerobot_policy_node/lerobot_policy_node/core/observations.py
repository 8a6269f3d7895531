"""Policy observations from contract topics (pure: takes messages as plain objects, no rclpy).

The same rule as the recorder and the bag converter, through their code (`lerobot_contract.sampler`):
frames sit on the contract's fps grid, and a frame takes, per feature, the newest sample stamped at or
before the frame time (nothing from the future), dropping frames with a sample older than the feature's
`max_age_s` or spread by more than `sync_tolerance_s`. The policy runs on the newest such frame, so what it
sees at run time is what it was trained on.

Values are the dataset's: joints picked by name and converted with the contract's units, cameras decoded
to (H, W, 3) uint8 and resized to what the policy was trained on (the policy normalises them itself).
Actions go the other way: dataset units back to ROS units with the contract's `action` feature.

Stamps may come from another host's clock (the robot's, with the policy on an inference host): the sampler
estimates the offset between this node's clock and the stamps (receive time - stamp, the smallest seen, so it
includes the smallest transport delay), and `stamp_clock(now)` turns this node's clock into the stamps' clock,
so freshness is judged without the hosts' clocks having to agree. A first sample further than
`max_clock_offset_s` from this node's clock is refused with the reason (the clocks need syncing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract import ClockJumpError, Contract, FeatureContract, MessageMismatchError
from lerobot_contract.align import AlignedFrame, AlignFeature, SyncReport
from lerobot_contract.frames import FrameDecoder
from lerobot_contract.sampler import LiveSampler, LiveStats
from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ObservationError
from lerobot_policy_node.core.policies import TIMESTAMP_KEY, InputFeature

ACTION_KEY = "action"


@dataclass
class ObservationStats:
    """Counters for the policy status and /diagnostics."""

    samples: int = 0
    future_samples: int = 0
    clock_offset_refused: int = 0
    clock_jumps: int = 0
    bad_messages: int = 0
    last_problem: str = ""


def match_inputs(contract: Contract, inputs: Sequence[InputFeature]) -> dict[str, FeatureContract]:
    """The contract feature of every policy input; ObservationError naming what the contract cannot supply."""
    missing = [f.key for f in inputs if f.key not in contract.features]
    if missing:
        raise ObservationError(
            f"the policy needs {missing}, which contract {contract.source} does not declare (it has "
            f"{sorted(contract.features)}); use the contract the policy was trained with"
        )
    matched: dict[str, FeatureContract] = {}
    for feature in inputs:
        source = contract.features[feature.key]
        if feature.visual != source.is_visual:
            kind = "a camera" if feature.visual else "a vector"
            raise ObservationError(f"the policy takes {feature.key!r} as {kind}; contract {contract.source} does not")
        if not feature.visual and (source.size,) != tuple(feature.shape):
            raise ObservationError(
                f"{feature.key!r}: the policy takes {feature.shape[0]} values, contract {contract.source} gives "
                f"{source.size} ({source.dataset_names}); use the contract the policy was trained with"
            )
        matched[feature.key] = source
    return matched


class ActionMapping:
    """Policy actions (dataset units, contract order) -> joint names and ROS units."""

    def __init__(self, contract: Contract, action_dim: int, action_names: Sequence[str] | None = None) -> None:
        feature = contract.features.get(ACTION_KEY)
        if feature is None or feature.is_image:
            raise ObservationError(
                f"contract {contract.source} declares no vector `action` feature; the executor needs its joints"
            )
        if feature.size != action_dim:
            raise ObservationError(
                f"the policy outputs {action_dim} action values, contract {contract.source} `action` has "
                f"{feature.size} ({feature.dataset_names}); use the contract the policy was trained with"
            )
        if action_names is not None and list(action_names) != feature.dataset_names:
            raise ObservationError(
                f"the policy's actions are {list(action_names)}, contract {contract.source} `action` is "
                f"{feature.dataset_names}; the order must match"
            )
        self.joint_names: tuple[str, ...] = tuple(feature.joints or feature.names or ())
        self._units = feature.joint_units()

    def to_ros(self, actions: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """(H, D) dataset units -> ROS units."""
        return np.asarray(self._units.inverse(np.asarray(actions, dtype=np.float64)), dtype=np.float64)


class ObservationAssembler:
    """Keeps the newest frame of the policy's inputs (see the module docstring); not thread-safe."""

    def __init__(
        self,
        contract: Contract,
        inputs: Sequence[InputFeature],
        *,
        latency_s: float = 0.01,
        future_tolerance_s: float = 0.05,
        max_clock_offset_s: float = 1.0,
    ) -> None:
        self.contract = contract
        self.inputs = {f.key: f for f in inputs}
        self.sources = match_inputs(contract, inputs)
        self.future_tolerance_ns = int(future_tolerance_s * NS)
        self.max_clock_offset_ns = int(max_clock_offset_s * NS)
        self._latency_ns = int(latency_s * NS)
        self.stats = ObservationStats()
        self._sampler = self._new_sampler()
        # Messages are converted (vectors) and decoded (images) only for the frames the policy runs on.
        self._decoder = FrameDecoder(contract, convert_vectors=True)
        self._frame: AlignedFrame | None = None
        self._started = False
        self._start_clock_ns = 0

    def _new_sampler(self) -> LiveSampler:
        features = [
            AlignFeature(key, None if f.max_age_s is None else int(f.max_age_s * NS)) for key, f in self.sources.items()
        ]
        tolerance = self.contract.sync_tolerance_s
        return LiveSampler(
            features,
            self.contract.fps,
            tolerance_ns=None if tolerance is None else int(tolerance * NS),
            latency_ns=self._latency_ns,
        )

    @property
    def topics(self) -> dict[str, list[str]]:
        """Topic -> the input features it feeds."""
        out: dict[str, list[str]] = {}
        for key, feature in self.sources.items():
            out.setdefault(feature.topic, []).append(key)
        return out

    @property
    def sampling(self) -> tuple[SyncReport, LiveStats]:
        """The sampler's counters (frames kept and dropped; late, refused samples), since it last started."""
        return self._sampler.report, self._sampler.live

    @property
    def waiting_for(self) -> list[str]:
        """Inputs that have not had a message yet."""
        return list(self._sampler.silent)

    def start(self, now_ns: int) -> None:
        """Begin (or begin again after a clock jump) collecting at clock time `now_ns`."""
        self._sampler.start(now_ns)
        self._start_clock_ns = now_ns
        self._frame = None
        self._started = True

    @property
    def clock_offset_ns(self) -> int | None:
        """This node's clock minus the stamps' clock (with the smallest transport delay); None before a sample."""
        offset: int | None = self._sampler.clock.offset_ns
        return offset

    def stamp_clock(self, now_ns: int) -> int:
        """This node's clock reading `now_ns` on the stamps' clock (unchanged before the first sample)."""
        return now_ns - (self.clock_offset_ns or 0)

    def clock_offset_problem(self, offset_ns: int, topic: str = "the inputs") -> str:
        """Why an offset is refused ('' when it is within `max_clock_offset_s`)."""
        if abs(offset_ns) <= self.max_clock_offset_ns:
            return ""
        where = "in the future" if offset_ns < 0 else "in the past"
        return (
            f"{topic}: message stamped {abs(offset_ns) / NS:.3f} s {where} of this node's clock, beyond "
            f"max_clock_offset {self.max_clock_offset_ns / NS:g} s (this host's clock is "
            f"{'behind' if offset_ns < 0 else 'ahead of'} the sender's, or delivery is that late): sync the hosts' "
            "clocks (chrony/PTP) or raise max_clock_offset; ignored"
        )

    def push(self, topic: str, msg: Any, stamp_ns: int, receive_ns: int) -> None:
        """A message of `topic` stamped `stamp_ns` (on the sender's clock), received at `receive_ns` (this node's)."""
        # The first sample sets the offset estimate (later ones only refine it, see LiveSampler's StampClock):
        # one off by more than max_clock_offset is refused rather than taken as the clock.
        first = self.clock_offset_ns is None
        if first:
            problem = self.clock_offset_problem(receive_ns - stamp_ns, topic)
            if problem:
                self.stats.clock_offset_refused += 1
                self.stats.future_samples += stamp_ns > receive_ns
                self.stats.last_problem = problem
                return
        if not self._started:
            self.start(receive_ns)
        for key in self.topics.get(topic, ()):
            self.stats.samples += 1
            try:
                self._sampler.push(key, stamp_ns, msg, receive_ns)
            except ClockJumpError as err:
                self._clock_jump(str(err), receive_ns)
                return
        if first and self.clock_offset_ns is not None:
            # The start was read on this node's clock before the stamps' offset was known: put it on their clock
            # (the sampler starts again, with this first sample).
            self._sampler.start(self._start_clock_ns)
            for key in self.topics.get(topic, ()):
                self._sampler.push(key, stamp_ns, msg, receive_ns)
        self.poll(receive_ns)

    def poll(self, now_ns: int) -> None:
        """Release the frames due at `now_ns`, keeping the newest."""
        try:
            frames = self._sampler.poll(now_ns)
        except ClockJumpError as err:
            self._clock_jump(str(err), now_ns)
            return
        if frames:
            self._frame = frames[-1]

    def _clock_jump(self, message: str, now_ns: int) -> None:
        self.stats.clock_jumps += 1
        self.stats.last_problem = f"{message}; observations restart"
        self._sampler = self._new_sampler()
        self.start(now_ns)

    def newest(self) -> AlignedFrame | None:
        """The newest complete frame that passed the age and sync checks (None before the first)."""
        return self._frame

    def build(self, frame: AlignedFrame) -> dict[str, Any]:
        """The policy's observation for `frame` (decoding and resizing happen here, off the callbacks)."""
        observation: dict[str, Any] = {TIMESTAMP_KEY: frame.time_ns / NS}
        for key, pick in frame.picks.items():
            try:
                value = self._decoder.value(key, pick)
            except MessageMismatchError as err:
                self.stats.bad_messages += 1
                raise ObservationError(f"{key}: {err}") from None
            observation[key] = resize(value, self.inputs[key].shape) if self.sources[key].is_visual else value
        return observation


def resize(picture: npt.NDArray[Any], shape: tuple[int, ...]) -> npt.NDArray[np.uint8]:
    """(H, W, 3) uint8 picture at the (H, W, 3) `shape` a policy was trained on (area interpolation)."""
    if tuple(picture.shape) == tuple(shape):
        return np.asarray(picture, dtype=np.uint8)
    import cv2

    height, width = int(shape[0]), int(shape[1])
    out = cv2.resize(picture, (width, height), interpolation=cv2.INTER_AREA)
    return np.asarray(out, dtype=np.uint8)


def contract_inputs(contract: Contract, keys: Mapping[str, tuple[int, ...]] | None = None) -> list[InputFeature]:
    """InputFeatures for contract features (all observation.* ones by default), shaped as the contract stores them."""
    out = []
    for key, feature in contract.features.items():
        if keys is not None and key not in keys:
            continue
        if keys is None and not key.startswith("observation."):
            continue
        shape = tuple(feature.shape) if feature.is_image else (feature.size,)
        out.append(InputFeature(key, shape, feature.is_visual))
    return out
