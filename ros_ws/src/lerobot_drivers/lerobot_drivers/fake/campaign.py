"""Servo-fault campaigns: inject faults into a fake arm while the driver's cycle moves it, and audit every goal.

The cycle is the arm driver's own (`Arm.read_state`, then `arms.arm.write_target`: the controller's target,
written, rolled back in the controller when the write fails), run against the fake bus over a
pseudo-terminal, on a simulated clock advanced by one loop period per cycle whether the cycle worked or
not. Every Goal_Position write the fake servos receive is recorded; a campaign reports how many steps
exceeded `max_velocity * period` (plus one encoder tick of rounding) and how many goals left the
calibrated range. No ROS.

Fault kinds (each injection lasts a few cycles, between stretches of clean cycles):
- `timeout`: the next 1..24 replies are lost (the bus retries; past 3 tries of a 6-reply read a cycle fails);
- `checksum`: the next 1..24 replies carry a bad checksum;
- `silent`: no servo answers for 1..`max_silent_cycles` cycles (the port stays open), then all do again;
- `status`: one servo reports error bits (overheat, overload, voltage, ...) for 1..8 cycles.

The counts say whether faults really happened (`faults_seen`, `failed_cycles`) and what reached the motors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import Arm, default_fake_calibration, make_bus, write_target
from lerobot_drivers.arms.controller import ArmController, ControllerConfig
from lerobot_drivers.fake.arms import fake_arm_bus
from lerobot_drivers.fake.bus import FakeServoBus, PtyServoBus
from lerobot_drivers.motors.errors import BusCommunicationError

FAULT_KINDS = ("timeout", "checksum", "silent", "status")
# Feetech status bits / Dynamixel hardware error bits the fake can report (any non-zero value works).
_STATUS_BITS = (0x01, 0x04, 0x08, 0x20)


@dataclass
class CampaignResult:
    """What one campaign did and found. `violations` and `out_of_range` must be 0."""

    robot: str
    kind: str
    injections: int = 0
    bad_injections: int = 0  # injections during whose stretch of cycles a goal broke a rule
    cycles: int = 0
    failed_cycles: int = 0
    faults_seen: int = 0  # replies the fake dropped/corrupted/silenced, or reads that returned error bits
    goal_writes: int = 0
    max_step_ticks: int = 0
    limit_ticks: int = 0
    violations: int = 0
    out_of_range: int = 0
    examples: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "injections": self.injections,
            "bad_injections": self.bad_injections,
            "cycles": self.cycles,
            "failed_cycles": self.failed_cycles,
            "faults_seen": self.faults_seen,
            "goal_writes": self.goal_writes,
            "max_step_ticks": self.max_step_ticks,
            "limit_ticks": self.limit_ticks,
            "violations": self.violations,
            "out_of_range": self.out_of_range,
        }


class _GoalAudit:
    """Every Goal_Position write per motor, checked against the step limit and the calibrated range."""

    def __init__(self, fake: FakeServoBus, limit_ticks: dict[int, int], ranges: dict[int, tuple[int, int]]) -> None:
        self.limit_ticks = limit_ticks
        self.ranges = ranges
        self.last: dict[int, int] = {}
        self.writes = 0
        self.max_step = 0
        self.violations = 0
        self.out_of_range = 0
        self.examples: list[str] = []
        self._fake = fake
        self._address = {i: s.model.register("Goal_Position").address for i, s in fake.servos.items()}
        self.cycle = 0

    def __call__(self, motor_id: int, address: int, data: bytes) -> None:
        if address != self._address.get(motor_id):
            return
        goal = self._fake.servo(motor_id).get("Goal_Position")
        self.writes += 1
        previous = self.last.get(motor_id)
        self.last[motor_id] = goal
        low, high = self.ranges[motor_id]
        if not low <= goal <= high:
            self.out_of_range += 1
            self._example(f"cycle {self.cycle}: id {motor_id} goal {goal} outside {low}..{high}")
        if previous is None:
            return
        step = abs(goal - previous)
        self.max_step = max(self.max_step, step)
        if step > self.limit_ticks[motor_id]:
            self.violations += 1
            self._example(
                f"cycle {self.cycle}: id {motor_id} goal {previous} -> {goal} (limit {self.limit_ticks[motor_id]})"
            )

    def _example(self, text: str) -> None:
        if len(self.examples) < 5:
            self.examples.append(text)


def _motion(rng: np.random.Generator, n: int) -> Callable[[ArmController, float], None]:
    """A way of moving for the next stretch of cycles: far streamed targets, a fast sine, or a trajectory."""
    mode = rng.integers(3)
    if mode == 0:
        far = rng.choice([-1e6, 1e6], size=n)

        def stream_far(controller: ArmController, now: float) -> None:
            controller.command(controller.config.joint_names, far.tolist(), now)

        return stream_far
    if mode == 1:
        phase, amplitude = rng.uniform(0, 2 * math.pi, size=n), rng.uniform(0.5, 3.0, size=n)

        def stream_sine(controller: ArmController, now: float) -> None:
            # Up to ~19 rad/s peak: well above any sensible velocity limit.
            controller.command(
                controller.config.joint_names, (amplitude * np.sin(2 * math.pi * now + phase)).tolist(), now
            )

        return stream_sine
    points = rng.uniform(-3.0, 3.0, size=(3, n))
    sent = False

    def trajectory(controller: ArmController, now: float) -> None:
        nonlocal sent
        if not sent:
            controller.trajectory(controller.config.joint_names, now, [0.05, 0.1, 0.3], points.tolist(), now)
            sent = True

    return trajectory


def _faults_seen(fake: FakeServoBus) -> int:
    c = fake.counters
    return c.dropped + c.corrupted + c.silenced


def run_campaign(
    kind: str,
    injections: int,
    *,
    robot: str = "so101_follower",
    seed: int = 0,
    max_velocity: float = 3.0,
    loop_rate: float = 100.0,
    bus_timeout: float = 0.01,
    max_silent_cycles: int = 5,
    update_period: float | None = None,
) -> CampaignResult:
    """Inject `injections` faults of `kind` (one of FAULT_KINDS) while moving; see the module docstring.

    `update_period` is the controller's (default: the loop period). A longer one credits a gap with more
    motion, the catch-up step of issue 18; the audit then finds steps above the limit.
    """
    if kind not in FAULT_KINDS:
        raise ValueError(f"fault kind {kind!r}: expected one of {', '.join(FAULT_KINDS)}")
    if injections < 0:
        raise ValueError(f"injections must be >= 0, got {injections}")
    rng = np.random.default_rng(seed)
    spec = get_arm(robot)
    calibration = default_fake_calibration(spec)
    fake = fake_arm_bus(spec, calibration)
    period = 1.0 / loop_rate
    limit_ticks, ranges = {}, {}
    for joint in spec.joints:
        resolution = spec.model(joint.name).resolution
        rad_per_tick = 2 * math.pi / (resolution - 1)
        # The goal in radians steps at most max_velocity * period; rounding to ticks adds at most one tick.
        limit_ticks[joint.motor_id] = math.ceil(max_velocity * period / rad_per_tick) + 1
        ranges[joint.motor_id] = (calibration[joint.name].range_min, calibration[joint.name].range_max)
    audit = _GoalAudit(fake, limit_ticks, ranges)
    fake.on_write = audit
    result = CampaignResult(robot=robot, kind=kind, limit_ticks=max(limit_ticks.values()))
    with PtyServoBus(fake) as pty:
        arm = Arm(spec, make_bus(spec, pty.port, timeout_s=bus_timeout, retries=2), calibration)
        arm.connect()
        try:
            arm.write_calibration_if_needed()
            arm.configure()
            lower, upper = arm.limits()
            controller = ArmController(
                ControllerConfig(
                    joint_names=spec.joint_names,
                    lower=tuple(lower),
                    upper=tuple(upper),
                    max_velocity=max_velocity,
                    update_period=period if update_period is None else update_period,
                )
            )
            now = 0.0
            controller.activate(arm.hold_and_enable_torque(), now)
            n = len(spec.joint_names)
            move = _motion(rng, n)
            fault_cycles_left = 0
            status_motor = 0

            def cycle() -> None:
                nonlocal now
                now += period
                audit.cycle = result.cycles
                result.cycles += 1
                move(controller, now)
                try:
                    state = arm.read_state()
                    if state.errors:
                        result.faults_seen += 1
                    write_target(arm, controller, now, state.positions)
                except BusCommunicationError:
                    result.failed_cycles += 1

            for _ in range(injections):
                bad_before = audit.violations + audit.out_of_range
                for _ in range(int(rng.integers(2, 7))):  # clean cycles, moving
                    cycle()
                if rng.random() < 0.2:
                    move = _motion(rng, n)
                length = int(rng.integers(1, 25))
                with fake.lock:
                    if kind == "timeout":
                        fake.faults.drop_next = length
                    elif kind == "checksum":
                        fake.faults.corrupt_next = length
                    elif kind == "silent":
                        fake.faults.silent = True
                        length = int(rng.integers(1, max_silent_cycles + 1))
                if kind in ("timeout", "checksum"):
                    length = 3  # the counters are used up within the next cycles
                if kind == "status":
                    length = int(rng.integers(1, 9))
                    status_motor = int(rng.choice(list(fake.servos)))
                    fake.set_error(status_motor, int(rng.choice(_STATUS_BITS)))
                result.injections += 1
                fault_cycles_left = length
                while fault_cycles_left > 0:
                    cycle()
                    fault_cycles_left -= 1
                with fake.lock:
                    fake.faults.silent = False
                    fake.faults.drop_next = fake.faults.corrupt_next = 0
                if kind == "status":
                    fake.set_error(status_motor, 0)
                cycle()  # the first cycle after the fault: where a catch-up step would be
                if audit.violations + audit.out_of_range > bad_before:
                    result.bad_injections += 1
            for _ in range(5):
                cycle()
        finally:
            arm.close()
    result.faults_seen += _faults_seen(fake)
    result.goal_writes = audit.writes
    result.max_step_ticks = audit.max_step
    result.violations = audit.violations
    result.out_of_range = audit.out_of_range
    result.examples = audit.examples
    return result
