"""A small kinematic model of the SO-100/SO-101 arm for end-effector jogging.

The chain: `shoulder_pan` turns the arm about the vertical axis; `shoulder_lift`, `elbow_flex` and
`wrist_flex` bend it in the vertical plane it points along. Angles are this project's joint radians (zero =
middle of the calibrated range, which LeRobot's calibration puts at the arm's "L" pose: upper arm up,
forearm forward). Link lengths approximate the SO-101 (TheRobotStudio URDF); they are parameters,
because a jogging IK only needs the right directions, not millimetre accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IK_JOINTS = 4  # shoulder_pan, shoulder_lift, elbow_flex, wrist_flex


@dataclass(frozen=True)
class ArmChain:
    """Link lengths in metres (defaults: SO-101)."""

    base_height: float = 0.119
    shoulder_offset: float = 0.030
    upper_arm: float = 0.116
    forearm: float = 0.135
    wrist_to_tip: float = 0.100

    def __post_init__(self) -> None:
        for name in ("upper_arm", "forearm", "wrist_to_tip"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 m, got {getattr(self, name)}")

    def forward(self, q: FloatArray) -> FloatArray:
        """Tip position (x forward, y left, z up; metres) for the first four joint angles."""
        pan, lift, elbow, wrist = (float(v) for v in q[:IK_JOINTS])
        a1 = lift  # upper arm angle from vertical
        a2 = a1 + elbow + math.pi / 2  # forearm: horizontal at the zero pose
        a3 = a2 + wrist
        reach = (
            self.shoulder_offset
            + self.upper_arm * math.sin(a1)
            + self.forearm * math.sin(a2)
            + self.wrist_to_tip * math.sin(a3)
        )
        height = (
            self.base_height
            + self.upper_arm * math.cos(a1)
            + self.forearm * math.cos(a2)
            + self.wrist_to_tip * math.cos(a3)
        )
        return np.array([reach * math.cos(pan), reach * math.sin(pan), height])

    def jacobian(self, q: FloatArray, eps: float = 1e-6) -> FloatArray:
        """d(tip)/d(q) for the first four joints (3 x 4), by central differences."""
        q = np.asarray(q[:IK_JOINTS], dtype=np.float64)
        columns = []
        for i in range(IK_JOINTS):
            dq = np.zeros(IK_JOINTS)
            dq[i] = eps
            columns.append((self.forward(q + dq) - self.forward(q - dq)) / (2 * eps))
        return np.stack(columns, axis=1)


def ik_velocity_step(
    chain: ArmChain, q: FloatArray, tip_velocity: FloatArray, dt: float, damping: float = 0.02, max_step: float = 0.1
) -> FloatArray:
    """Joint deltas (first four joints) moving the tip by `tip_velocity * dt`: damped least squares, so the
    step stays bounded near singular poses (arm stretched), each delta at most `max_step` rad."""
    jac = chain.jacobian(q)
    target = np.asarray(tip_velocity, dtype=np.float64) * dt
    jjt = jac @ jac.T + (damping**2) * np.eye(3)
    dq: FloatArray = jac.T @ np.linalg.solve(jjt, target)
    return np.clip(dq, -max_step, max_step)
