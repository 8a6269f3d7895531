"""kill -9 at many points of bag2dataset, and bag2dataset onto a full disk (see kill_points.py).

Default run: a few kill points and disk sizes; `make reliability`: >= 100 kill points (LeRobot's loader checks
every 10th state when the reference venv exists) and 30 disk sizes.
"""

from __future__ import annotations

import os

import converter_kill_points as kill_points
import pytest


def check(counts, record) -> None:
    record(counts)
    assert counts.bad == 0, counts.summary()


def test_bag2dataset_kill_points_quick(reliability_results) -> None:
    check(kill_points.run(3, reference_every=0), reliability_results)


@pytest.mark.reliability
def test_bag2dataset_kill_points_full(reliability_results) -> None:
    counts = kill_points.run(100, reference_every=10)
    assert counts.tried == 100
    check(counts, reliability_results)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="disk-full runs mount a small tmpfs: needs root")


@needs_root
def test_bag2dataset_disk_full_quick(reliability_results) -> None:
    check(kill_points.run(3, disk_full=True), reliability_results)


@needs_root
@pytest.mark.reliability
def test_bag2dataset_disk_full_full(reliability_results) -> None:
    check(kill_points.run(30, disk_full=True), reliability_results)
