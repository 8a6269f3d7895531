"""The headless-browser tests (marker `browser`) are opt-in: they load Rerun's web viewer in Chromium on a software
rasterizer, tens of seconds each. Run them with `make test-browser` (or `pytest -m browser`, or
LEROBOT_ROS_BROWSER=1); they skip with a reason when Debian's `chromium` is not installed."""

from __future__ import annotations

import os

import pytest
from browser import chromium


def _selected(config: pytest.Config) -> bool:
    return os.environ.get("LEROBOT_ROS_BROWSER") == "1" or "browser" in (config.option.markexpr or "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Not selected: skipped as opt-in (whether chromium is installed or not); selected: skipped without chromium."""
    if not _selected(config):
        reason = "headless-browser test: run `make test-browser` (or pytest -m browser)"
    elif chromium() is None:
        reason = "Debian's chromium is not installed (scripts/setup.sh --with-browser)"
    else:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(skip)
