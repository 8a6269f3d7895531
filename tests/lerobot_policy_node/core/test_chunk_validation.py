"""Chunks refused per chunk with a counted reason, and the executor's limits from a robot configuration (issue 18)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from lerobot_contract.time import NS
from lerobot_policy_node.core.errors import ChunkRejected, PolicyConfigError
from lerobot_policy_node.core.executor import MAX_PERIOD_NS, ChunkExecutor, ExecutorConfig
from lerobot_policy_node.core.robot_limits import limits_from_parameters, load_robot_limits

JOINTS = ("a", "b")
NOW = 4000 * NS  # past the one-hour-old stamp below
PERIOD = NS // 10


def executor() -> ChunkExecutor:
    return ChunkExecutor(ExecutorConfig(JOINTS, (-1.0, -1.0), (1.0, 1.0), max_velocity=2.0))


def accept(ex: ChunkExecutor, *, names=JOINTS, data=None, horizon=5, stamp=NOW, period=PERIOD) -> None:
    data = np.full(horizon * len(names), 0.5) if data is None else data
    ex.accept(list(names), data, horizon, stamp, period, 3, NOW)


@pytest.mark.parametrize(
    ("reason", "fields"),
    [
        ("stamp", {"stamp": -5 * NS}),
        ("stamp", {"stamp": 0}),
        ("future", {"stamp": 2147483647 * NS}),
        ("stale", {"stamp": NS}),
        ("names", {"names": ("a", "c")}),
        ("names", {"names": ("a", "b", "a"), "data": np.zeros(15)}),
        ("shape", {"data": np.zeros(9)}),
        ("shape", {"horizon": 0, "data": np.zeros(0)}),
        ("non_finite", {"data": np.array([0.1, np.nan] * 5)}),
        ("period", {"period": -PERIOD}),
        ("period", {"period": MAX_PERIOD_NS + 1}),
        # An hour-old observation whose long horizon still reaches the present (400 steps x 10 s).
        ("too_old", {"stamp": NOW - 3600 * NS, "horizon": 400, "period": 10 * NS}),
        ("too_old", {"stamp": NOW - 2 * NS - 1, "horizon": 40}),
        ("too_long", {"horizon": 1001}),
    ],
)
def test_a_malformed_chunk_is_refused_counted_and_changes_nothing(reason, fields):
    ex = executor()
    accept(ex)
    before = ex.trajectory(NOW)
    with pytest.raises(ChunkRejected) as info:
        accept(ex, **fields)
    assert info.value.reason == reason
    assert ex.stats.chunks_rejected == {reason: 1} and ex.stats.chunks_accepted == 1
    after = ex.trajectory(NOW)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    accept(ex, data=np.full(10, -0.5))  # the next valid chunk is taken
    assert ex.stats.chunks_accepted == 2


def test_a_chunk_of_a_million_is_clipped_and_rate_limited():
    ex = executor()
    ex.reset([0.0, 0.0], NOW)
    accept(ex, data=np.full(10, 1e6))
    targets = [ex.target(NOW + k * NS // 100) for k in range(1, 101)]
    steps = np.abs(np.diff(np.array([[0.0, 0.0], *targets]), axis=0))
    assert steps.max() <= 2.0 / 100 + 1e-12  # max_velocity x 10 ms
    assert targets[-1] == pytest.approx([1.0, 1.0])  # clipped at the upper limits, reached after 0.5 s


@pytest.mark.parametrize("missing", ["joint_names", "joint_limits_lower", "joint_limits_upper", "max_velocity"])
def test_without_a_robot_config_every_limit_is_required_by_name(missing):
    values = {"joint_names": ["a"], "joint_limits_lower": [-1.0], "joint_limits_upper": [1.0], "max_velocity": 1.0}
    values[missing] = [] if missing != "max_velocity" else 0.0
    with pytest.raises(PolicyConfigError, match=f"parameter {missing} is required") as info:
        limits_from_parameters(values, "/follower/action_executor")
    assert "\n" not in str(info.value) and "robot_config" in str(info.value)


def test_limits_from_an_executor_section_and_errors_that_name_the_file(tmp_path):
    path = tmp_path / "robot.yaml"
    section = {"joint_names": list(JOINTS), "joint_limits_lower": [-1, -2], "joint_limits_upper": [1, 2]}
    path.write_text(yaml.safe_dump({"/arm/action_executor": {"ros__parameters": {**section, "max_velocity": 1.5}}}))
    limits = load_robot_limits(path, "/arm/action_executor")
    assert limits.joint_names == JOINTS and limits.lower == (-1.0, -2.0) and limits.max_velocity == 1.5
    narrowed = limits.narrowed([-0.5, -3.0], None, 3.0)
    assert narrowed.lower == (-0.5, -2.0) and narrowed.max_velocity == 1.5
    with pytest.raises(PolicyConfigError, match=r"no /other/action_executor or /other/arm_driver section"):
        load_robot_limits(path, "/other/action_executor")
    with pytest.raises(PolicyConfigError, match="does not exist"):
        load_robot_limits(tmp_path / "none.yaml", "/arm/action_executor")
    path.write_text(yaml.safe_dump({"/arm/action_executor": {"ros__parameters": section}}))
    with pytest.raises(PolicyConfigError, match="parameter max_velocity is required"):
        load_robot_limits(path, "/arm/action_executor")


def test_limits_from_the_arm_driver_section_are_the_calibrated_ranges(tmp_path):
    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.motors.calibration import range_radians, save_calibration

    spec = get_arm("so101_follower")
    calibration = default_fake_calibration(spec)
    save_calibration(tmp_path / "f.json", calibration)
    driver = {"robot_type": "so101_follower", "calibration_file": str(tmp_path / "f.json")}
    path = tmp_path / "so101.yaml"
    path.write_text(yaml.safe_dump({"/follower/arm_driver": {"ros__parameters": driver}}))
    limits = load_robot_limits(path, "/follower/action_executor")
    ranges = [range_radians(calibration[n], spec.model(n).resolution) for n in spec.joint_names]
    assert limits.joint_names == spec.joint_names and limits.max_velocity == 3.0  # the driver's default
    assert limits.lower == pytest.approx([min(r) for r in ranges]) and limits.upper == pytest.approx(
        [max(r) for r in ranges]
    )
    path.write_text(yaml.safe_dump({"/follower/arm_driver": {"ros__parameters": {"robot_type": "so101_follower"}}}))
    with pytest.raises(PolicyConfigError, match="calibration_file is required"):
        load_robot_limits(path, "/follower/action_executor")


def test_the_shipped_robot_configs_give_the_executor_its_limits():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    sim = load_robot_limits(repo / "config/robots/so101_sim.yaml", "/follower/action_executor")
    assert sim.joint_names[-1] == "gripper" and sim.max_velocity == 60.0  # the demonstrations' speed (so101_sim.yaml)
    with pytest.raises(PolicyConfigError, match=r"calibration file .* does not exist"):
        load_robot_limits(repo / "config/robots/so101.yaml", "/follower/action_executor")  # edit for your arm


def test_the_fake_hardware_robot_config_points_at_the_fake_buses_calibration():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    try:
        limits = load_robot_limits(repo / "config/robots/so101_fake.yaml", "/follower/action_executor")
    except PolicyConfigError as err:  # no fake arm started on this machine yet
        assert "/tmp/lerobot_ros_fake/follower_so101_follower.json" in str(err)
    else:
        assert limits.joint_names[0] == "shoulder_pan" and limits.max_velocity == 3.0


def test_age_and_length_limits_name_the_value_and_the_parameter():
    ex = ChunkExecutor(ExecutorConfig(JOINTS, max_chunk_age_s=0.5, max_chunk_steps=10))
    with pytest.raises(ChunkRejected, match=r"observation 0\.600 s old, older than max_chunk_age = 0\.5 s") as info:
        accept(ex, stamp=NOW - 600_000_000, horizon=10)
    assert info.value.reason == "too_old"
    with pytest.raises(ChunkRejected, match="has 11 steps, more than max_chunk_steps = 10") as info:
        accept(ex, horizon=11)
    assert info.value.reason == "too_long"
    accept(ex, stamp=NOW - 500_000_000, horizon=10)  # at the limits: taken
    assert ex.stats.chunks_rejected == {"too_old": 1, "too_long": 1} and ex.stats.chunks_accepted == 1


def test_a_too_long_chunk_is_refused_before_its_data_is_read():
    class Unreadable(list):
        def __iter__(self):
            raise AssertionError("the data of a refused chunk was read")

        def __array__(self, *args, **kwargs):
            raise AssertionError("the data of a refused chunk was converted")

    ex = executor()
    with pytest.raises(ChunkRejected) as info:
        ex.accept(list(JOINTS), Unreadable(), 100_000, NOW, PERIOD, 3, NOW)
    assert info.value.reason == "too_long"


@pytest.mark.parametrize(("field", "value"), [("max_chunk_age_s", 0.0), ("max_chunk_steps", 0)])
def test_limits_must_be_positive(field, value):
    with pytest.raises(PolicyConfigError, match=field):
        ExecutorConfig(JOINTS, **{field: value})
