"""The parameter table (pure): from a dataclass, checks with one clear line, config, runtime changes, Markdown."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass

import pytest

from lerobot_ros.node_kit.parameters import Kind, ParameterError, ParameterTable, param


@dataclass(frozen=True)
class Example:
    port: str = param("", "serial port")
    loop_rate: float = param(100.0, "control loop rate (Hz)", low=1.0, high=1000.0)
    quality: int = param(90, "JPEG quality", low=1, high=100, step=1, read_only=False)
    blend: str = param("crossfade", "how chunks meet", choices=("crossfade", "replace"), read_only=False)
    enabled: bool = param(True, "start enabled", read_only=False)
    lower: tuple[float, ...] | None = param(None, "per-joint lower limits (rad)")
    names: tuple[str, ...] = param((), "camera names")
    hold: int = param(3, "failed cycles before ERROR", low=1, high=1000, read_only=False)
    lost: int = param(10, "failed cycles before the bus is lost", low=1, high=100_000, read_only=False)

    def __post_init__(self) -> None:
        if self.hold > self.lost:
            raise ValueError(f"hold ({self.hold}) must not exceed lost ({self.lost})")


TABLE = ParameterTable.of(Example)


def test_the_table_comes_from_the_fields():
    assert TABLE.names == ("port", "loop_rate", "quality", "blend", "enabled", "lower", "names", "hold", "lost")
    rate = TABLE.spec("loop_rate")
    assert (rate.kind, rate.default, rate.low, rate.high, rate.read_only) == (Kind.DOUBLE, 100.0, 1.0, 1000.0, True)
    assert TABLE.spec("quality").kind is Kind.INTEGER and not TABLE.spec("quality").read_only
    assert TABLE.spec("lower").kind is Kind.DOUBLE_ARRAY and TABLE.spec("lower").default is None
    assert TABLE.spec("names").kind is Kind.STRING_ARRAY
    assert TABLE.spec("blend").choices == ("crossfade", "replace")


def test_build_gives_a_typed_frozen_config():
    config = TABLE.build({"port": "/dev/ttyACM0", "lower": [-1.0, -2.0], "names": ["front"]})
    assert config == Example(port="/dev/ttyACM0", lower=(-1.0, -2.0), names=("front",))
    with pytest.raises(FrozenInstanceError):
        config.port = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("loop_rate", 0.5, "parameter loop_rate = 0.5 is not allowed: expected a double in 1.0..1000.0"),
        ("loop_rate", 30, "parameter loop_rate = 30 is not allowed: expected a double in 1.0..1000.0 (write 30.0"),
        ("quality", 101, "parameter quality = 101 is not allowed: expected an integer in 1..100 (step 1)"),
        ("quality", True, "parameter quality = True is not allowed: expected an integer"),
        ("blend", "mix", "parameter blend = 'mix' is not allowed: expected a string, one of crossfade, replace"),
        ("port", 3, "parameter port = 3 is not allowed: expected a string"),
        ("lower", [1.0, "a"], "parameter lower = [1.0, 'a'] is not allowed: expected a list of doubles"),
        ("names", "front", "parameter names = 'front' is not allowed: expected a list of strings"),
    ],
)
def test_a_bad_value_is_one_line_naming_parameter_value_and_what_is_allowed(name, value, message):
    with pytest.raises(ParameterError) as caught:
        TABLE.build({name: value})
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_the_configs_own_rule_across_parameters_is_a_parameter_error():
    with pytest.raises(ParameterError, match=r"hold \(20\) must not exceed lost \(10\)"):
        TABLE.build({"hold": 20})


def test_runtime_changes_go_through_the_same_table():
    config = TABLE.build({})
    changed = TABLE.change(config, {"quality": 50, "blend": "replace"})
    assert (changed.quality, changed.blend) == (50, "replace") and config.quality == 90
    with pytest.raises(ParameterError, match="parameter loop_rate is read-only: set it at start-up"):
        TABLE.change(config, {"loop_rate": 50.0})
    with pytest.raises(ParameterError, match=r"expected an integer in 1\.\.100"):
        TABLE.change(config, {"quality": 0})
    with pytest.raises(ParameterError, match="must not exceed"):
        TABLE.change(config, {"hold": 11})
    with pytest.raises(ParameterError, match="no parameter qualty; this node has port, loop_rate"):
        TABLE.change(config, {"qualty": 1})


def test_only_gives_a_group_of_per_item_settings():
    group = TABLE.only(["port", "quality"])
    assert group.build({"quality": 10}) == {"port": "", "quality": 10}


def test_a_bad_table_fails_when_it_is_read():
    @dataclass(frozen=True)
    class NoParam:
        x: int = 1

    @dataclass(frozen=True)
    class BadDefault:
        x: int = param(0, "x", low=1, high=2)

    @dataclass(frozen=True)
    class NoneNotOptional:
        x: int = param(None, "x")

    with pytest.raises(TypeError, match=r"NoParam.x is not a parameter: make it with param\(\)"):
        ParameterTable.of(NoParam)
    with pytest.raises(TypeError, match="the default of parameter x = 0 is not allowed"):
        ParameterTable.of(BadDefault)
    with pytest.raises(TypeError, match="annotate it"):
        ParameterTable.of(NoneNotOptional)
    with pytest.raises(ValueError, match="both low and high"):
        param(1, "x", low=0)


def test_markdown_has_one_row_per_parameter():
    lines = TABLE.markdown().splitlines()
    assert lines[0] == "| parameter | type | default | range / choices | read-only | description |"
    assert len(lines) == 2 + len(TABLE.names)
    assert "| `loop_rate` | double | `100.0` | 1.0..1000.0 | yes | control loop rate (Hz) |" in lines
    assert "| `blend` | string | `crossfade` | `crossfade`, `replace` | no | how chunks meet |" in lines
    assert '| `port` | string | `""` |  | yes | serial port |' in lines
    assert "| `lower` | double_array | (unset) |  | yes | per-joint lower limits (rad) |" in lines
