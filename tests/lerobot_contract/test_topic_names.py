"""Contract topic names follow ROS's rules (rmw_validate_full_topic_name): the pure check agrees with rclpy's
validator, and a contract naming a topic ROS refuses fails to load with one line naming file, key and problem
(a unicode or newline topic used to load, convert in bag2dataset, and fail the recorder's configure)."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
import yaml

from lerobot_contract import ContractError, load_contract
from lerobot_contract.schema import MAX_TOPIC_NAME_LENGTH, topic_name_problem

CONTRACTS = Path(__file__).resolve().parents[2] / "config" / "contracts"

NAMES = [
    "/follower/joint_states",
    "/a",
    "/_a",
    "/a__b",
    "/a/_1",
    "/A9/b_c",
    "",
    "/",
    "a/b",
    "/a/",
    "/1a",
    "/a/2b",
    "/a//b",
    "/a b",
    "/é",
    "/caméra/image_raw",
    "/a\nb",
    "/a\tb",
    "/a-b",
    "/a.b",
    "/a/~b",
    "/a/{node}",
    "~/a",
    "/a//b c",
    "/" + "x" * (MAX_TOPIC_NAME_LENGTH - 1),
    "/" + "x" * MAX_TOPIC_NAME_LENGTH,
    "/" + "x" * 300 + " ",
]


def _random_names(count: int) -> list[str]:
    rng = random.Random(30)
    alphabet = string.ascii_letters + string.digits + "_/" * 6 + " -.~{}é\n"
    return ["/" * rng.randint(0, 1) + "".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(count)]


# rclpy's reasons and the words of ours that say the same.
REASONS = {
    "must not be empty": "must not be empty",
    "must be absolute": "must be absolute",
    "must not end with": "must not end with a '/'",
    "characters other than": "characters other than alphanumerics",
    "repeated": "repeated '/'",
    "starts with a number": "starts with a number",
    "should not exceed": "must not be longer than",
}


def test_topic_name_rule_agrees_with_rclpy() -> None:
    """Every name: valid for both or for neither, and refused for the same reason (the first rmw finds)."""
    rclpy_impl = pytest.importorskip("rclpy.impl.implementation_singleton").rclpy_implementation
    for name in NAMES + _random_names(3000):
        theirs = rclpy_impl.rclpy_get_validation_error_for_full_topic_name(name)
        ours = topic_name_problem(name)
        if theirs is None:
            assert ours is None, (name, ours)
            continue
        words = [ours_words for theirs_words, ours_words in REASONS.items() if theirs_words in theirs[0]]
        assert len(words) == 1, theirs
        assert ours is not None and words[0] in ours, (name, ours, theirs)


@pytest.mark.parametrize(
    ("topic", "problem"),
    [
        ("/caméra/joint_states", "characters other than alphanumerics"),
        ("/follower/joint_states\n", "characters other than alphanumerics"),
        ("/follower//joint_states", "repeated '/'"),
        ("/follower/2nd", "starts with a number"),
        ("/follower/", "must not end with a '/'"),
        ("joint_states", "absolute"),
    ],
)
def test_contract_refuses_topics_ros_refuses(tmp_path: Path, topic: str, problem: str) -> None:
    data = yaml.safe_load((CONTRACTS / "so101.yaml").read_text())
    data["features"]["action"]["topic"] = topic
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(ContractError) as info:
        load_contract(path)
    text = str(info.value)
    assert "\n" not in text
    assert info.value.key == "features.action.topic"
    assert problem in info.value.problem and str(path) in text and "ROS refuses it" in text
