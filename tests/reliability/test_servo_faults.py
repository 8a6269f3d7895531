"""Servo faults while moving (issue 18): >= 100 injections of each kind the fake bus supports, both families.

Each injection is one fault (lost replies, bad checksums, a silent bus, servo error bits) during motion
driven by the arm driver's own cycle (`lerobot_drivers.fake.campaign`); every Goal_Position write the
fake servos receive is audited. An injection whose stretch of cycles wrote a goal step above
`max_velocity / loop_rate` (plus one tick of rounding) or a goal outside the calibrated range counts as
`data_lost` (a wrong goal nobody was told about); an exception other than a bus error is a `crash`.
"""

from __future__ import annotations

import time
import traceback

import pytest
from fuzz_harness import Counts, Finding

from lerobot_drivers.fake.campaign import FAULT_KINDS, run_campaign

QUICK = 10
FULL = 100
ROBOTS = ("so101_follower", "koch_follower")


def campaign(kind: str, robot: str, injections: int, record: object) -> Counts:
    counts = Counts(target=f"servo_faults_{kind}_{robot.split('_', maxsplit=1)[0]}")
    start = time.monotonic()
    try:
        result = run_campaign(kind, injections, robot=robot, seed=18)
    except Exception:
        counts.add("crash", Finding(counts.target, "crash", 18, 0, kind, traceback.format_exc()))
        record(counts)  # type: ignore[operator]
        raise
    counts.seconds = time.monotonic() - start
    # The campaign counts bad injections; its examples (the first wrong goals) are the findings' detail.
    detail = "; ".join(result.examples)
    for i in range(result.injections):
        if i < result.bad_injections:
            counts.add("data_lost", Finding(counts.target, "data_lost", 18, i, kind, detail))
        else:
            counts.add("ok")
    counts.extra.update(result.counts())
    record(counts)  # type: ignore[operator]
    return counts


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_servo_faults_quick(kind: str, robot: str, reliability_results: object) -> None:
    counts = campaign(kind, robot, QUICK, reliability_results)
    assert counts.tried == QUICK and counts.bad == 0, counts.extra


@pytest.mark.reliability
@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_servo_faults_full(kind: str, robot: str, reliability_results: object) -> None:
    counts = campaign(kind, robot, FULL, reliability_results)
    assert counts.tried == FULL and counts.bad == 0, counts.extra
