"""The headless-browser tests (marker `browser`) are opt-in: they load Rerun's web viewer in Chromium on a software
rasterizer, tens of seconds each. Run them with `make test-browser` (or `pytest -m browser`, or
LEROBOT_ROS_BROWSER=1); they skip with a reason when Debian's `chromium` is not installed."""

from __future__ import annotations

import os

import pytest


def _selected(config: pytest.Config) -> bool:
    return os.environ.get("LEROBOT_ROS_BROWSER") == "1" or "browser" in (config.option.markexpr or "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _selected(config):
        return
    skip = pytest.mark.skip(reason="headless-browser test: run `make test-browser` (or pytest -m browser)")
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(skip)
