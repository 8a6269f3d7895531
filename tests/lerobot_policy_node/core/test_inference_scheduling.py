"""The inference scheduler: adapted threshold, overlapping inferences, observation checks."""

from __future__ import annotations

import pytest

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import PolicyConfigError
from lerobot_policy_node.core.scheduling import InferenceScheduler, ObservationVerdict, SchedulerConfig

MS = 1_000_000
PERIOD = NS // 30


def test_threshold_follows_the_measured_inference_time():
    scheduler = InferenceScheduler(SchedulerConfig(threshold=0.2, margin_s=0.02))
    assert scheduler.should_start(0)  # nothing published yet: start at once
    # Fast inference: LeRobot's fixed fraction (0.2 x 30 steps) decides.
    scheduler.record_inference(0.01)
    assert scheduler.threshold_steps(30, PERIOD) == 6
    # Slow inference: the threshold grows so that the chunk arrives before the current one runs out.
    for _ in range(20):
        scheduler.record_inference(0.5)
    assert scheduler.expected_inference_s == pytest.approx(0.5)
    assert scheduler.threshold_steps(30, PERIOD) == 16  # ceil((0.5 + 0.02) * 30)
    scheduler.inference_started(0, PERIOD, 30)
    scheduler.inference_finished(0, 0.5, published=True)
    end = 29 * PERIOD
    assert scheduler.start_at_ns() == end - int(0.52 * NS)
    assert not scheduler.should_start(end - int(0.53 * NS))
    assert scheduler.should_start(end - int(0.51 * NS))
    assert scheduler.remaining_steps(0) == 30 and scheduler.remaining_steps(end + 1) == 0


def test_in_flight_inferences_count_as_coverage_and_failures_withdraw_it():
    scheduler = InferenceScheduler(SchedulerConfig(threshold=0.0, margin_s=0.0))
    scheduler.record_inference(0.1)
    scheduler.inference_started(0, PERIOD, 30)
    assert scheduler.in_flight == 1
    assert not scheduler.should_start(1, max_in_flight=1)  # the one worker is busy
    assert not scheduler.should_start(1, max_in_flight=2)  # its chunk will cover until 29 periods
    assert scheduler.should_start(29 * PERIOD - int(0.1 * NS), max_in_flight=2)
    scheduler.inference_finished(0, 0.1, published=False)  # NaN output: nothing covers anything
    assert scheduler.covered_until_ns() is None and scheduler.should_start(1)


def test_observations_must_be_fresh_new_and_not_from_the_future():
    scheduler = InferenceScheduler(SchedulerConfig(max_observation_age_s=0.1, future_tolerance_s=0.02))
    now = 10 * NS
    assert scheduler.check_observation(now - 50 * MS, now) is ObservationVerdict.OK
    assert scheduler.check_observation(now - 150 * MS, now) is ObservationVerdict.STALE
    assert scheduler.check_observation(now + 50 * MS, now) is ObservationVerdict.FUTURE
    assert scheduler.check_observation(now + 10 * MS, now) is ObservationVerdict.OK  # within the tolerance
    scheduler.inference_started(now - 50 * MS, PERIOD, 30)
    assert scheduler.check_observation(now - 50 * MS, now) is ObservationVerdict.ALREADY_USED
    scheduler.reset()
    assert scheduler.check_observation(now - 50 * MS, now) is ObservationVerdict.OK


@pytest.mark.parametrize(
    ("field", "value"), [("threshold", 1.5), ("margin_s", -1.0), ("max_observation_age_s", 0.0), ("window", 0)]
)
def test_config_errors_name_the_field(field, value):
    with pytest.raises(PolicyConfigError, match=field):
        SchedulerConfig(**{field: value})
