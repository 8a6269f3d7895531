"""Real-time chunking on the node side (pure: numpy, times in integer nanoseconds).

With ``blend: rtc`` (Black, Galliker, Levine 2025) each inference continues the chunk published before it: the
node hands the policy the previous chunk's remaining steps on the new observation's grid (`remaining_steps`),
the inference delay d in steps (measured: the observation's age plus the expected inference time and margin,
`measured_delay_steps`; or a fixed override), the execution horizon s and the guidance weight cap beta
(`RtcSettings`). The policy freezes the first d steps to the previous chunk and inpaints the rest of the
overlap (`lerobot_training.policies.rtc`); the executor then switches to the new chunk without blending.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import PolicyConfigError

# The paper's guidance weight cap (beta).
DEFAULT_MAX_GUIDANCE_WEIGHT = 5.0
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RtcSettings:
    """`inference_delay` (d, steps; None = measured per inference), `execution_horizon` (s, steps; None = the steps
    the previous chunk has already run when the observation is taken, i.e. the overlap is all it has left),
    `max_guidance_weight` (beta), `start_noise_level` (1 = sample from pure noise, as the paper; below 1 start from
    the previous chunk noised to that fraction of the schedule, which keeps its mode)."""

    inference_delay: int | None = None
    execution_horizon: int | None = None
    max_guidance_weight: float = DEFAULT_MAX_GUIDANCE_WEIGHT
    start_noise_level: float = 1.0

    def __post_init__(self) -> None:
        if self.inference_delay is not None and self.inference_delay < 0:
            raise PolicyConfigError(
                f"rtc_inference_delay: must be >= 0 steps (or -1: measured), got {self.inference_delay}"
            )
        if self.execution_horizon is not None and self.execution_horizon < 1:
            raise PolicyConfigError(
                f"rtc_execution_horizon: must be >= 1 step (or 0: from the schedule), got {self.execution_horizon}"
            )
        if not (math.isfinite(self.max_guidance_weight) and self.max_guidance_weight > 0):
            raise PolicyConfigError(f"rtc_max_guidance_weight: must be > 0, got {self.max_guidance_weight}")
        if not 0.0 < self.start_noise_level <= 1.0:
            raise PolicyConfigError(f"rtc_start_noise_level: must be in (0, 1], got {self.start_noise_level}")


@dataclass(frozen=True)
class ChunkPrefix:
    """What a policy that inpaints gets with an observation: `actions` (L, action_dim) in the policy's units, row 0
    at the observation's time, the paper's d, s and beta, and where the sampler starts (`RtcSettings`)."""

    actions: FloatArray
    inference_delay: int
    execution_horizon: int
    max_guidance_weight: float
    start_noise_level: float = 1.0


def remaining_steps(actions: FloatArray, stamp_ns: int, period_ns: int, observation_ns: int) -> FloatArray:
    """The chunk (step k at ``stamp_ns + k * period_ns``) from `observation_ns` on, on the grid
    ``observation_ns + k * period_ns`` (linear interpolation); empty when it ends before `observation_ns`."""
    values = np.asarray(actions, dtype=np.float64)
    times = stamp_ns + np.arange(len(values), dtype=np.int64) * period_ns
    if len(values) == 0 or observation_ns > times[-1]:
        return np.zeros((0, values.shape[1] if values.ndim == 2 else 0))
    count = int((times[-1] - observation_ns) // period_ns) + 1
    grid = observation_ns + np.arange(count, dtype=np.int64) * period_ns
    return np.stack([np.interp(grid, times, values[:, j]) for j in range(values.shape[1])], axis=1)


def measured_delay_steps(observation_age_s: float, expected_inference_s: float, margin_s: float, period_ns: int) -> int:
    """Steps of a chunk that are in the past when it reaches the executor: its observation's age when the inference
    starts plus the expected inference time and margin, rounded up."""
    delay = max(observation_age_s, 0.0) + max(expected_inference_s, 0.0) + max(margin_s, 0.0)
    return math.ceil(delay * NS / period_ns - 1e-9)


def make_prefix(settings: RtcSettings, previous: FloatArray, horizon: int, measured_delay: int) -> ChunkPrefix | None:
    """The prefix for a chunk of `horizon` steps given the previous chunk's `remaining_steps` (None: nothing left)."""
    if len(previous) == 0:
        return None
    delay = settings.inference_delay if settings.inference_delay is not None else measured_delay
    delay = min(delay, len(previous), horizon)
    horizon_s = (
        settings.execution_horizon if settings.execution_horizon is not None else max(horizon - len(previous), 1)
    )
    return ChunkPrefix(
        previous[:horizon].copy(), delay, horizon_s, settings.max_guidance_weight, settings.start_noise_level
    )
