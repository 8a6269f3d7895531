"""Fixtures for the bag converter tests: the real fixture bags and small synthetic bags."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bag_helpers import FIXTURE_BAGS, SMALL

from lerobot_bags.synthetic import SyntheticBagSpec, write_synthetic_bag


@pytest.fixture
def fixture_bags() -> Path:
    """The real rosbag2 fixture bags (../shared/fixtures/bags); the test is skipped when they are absent."""
    if not FIXTURE_BAGS.is_dir():
        pytest.skip(f"real fixture bags not found at {FIXTURE_BAGS} (they live outside the repository)")
    return FIXTURE_BAGS


@pytest.fixture
def make_bag(tmp_path: Path) -> Callable[..., Path]:
    """make_bag(name, **spec overrides) -> a synthetic bag folder under tmp_path (small by default)."""

    def make(name: str = "bag", **overrides: Any) -> Path:
        fields = {**SMALL.__dict__, **overrides}
        return write_synthetic_bag(tmp_path / name, SyntheticBagSpec(**fields))

    return make
