"""The two-host matrix (variants, delays, loss, clock offsets) runs only when asked for.

Tests marked `multihost_matrix` are skipped unless the run selects them with ``-m multihost_matrix`` or sets
``LEROBOT_ROS_MULTIHOST_MATRIX=1``; the default run keeps one two-host configuration (about a minute).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("LEROBOT_ROS_MULTIHOST_MATRIX") == "1" or "multihost_matrix" in (config.option.markexpr or ""):
        return
    reason = "the two-host matrix: pytest -m multihost_matrix (or LEROBOT_ROS_MULTIHOST_MATRIX=1)"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("multihost_matrix") is not None:
            item.add_marker(skip)
