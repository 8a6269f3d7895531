"""Helpers for the bag converter tests and benchmarks: contracts for synthetic bags, a conversion shortcut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lerobot_bags.convert import ConvertOptions, SplitRule
from lerobot_bags.pipeline import ConversionResult, convert_bags
from lerobot_bags.synthetic import SyntheticBagSpec
from lerobot_contract import Contract

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXTURE_BAGS = REPO_ROOT.parent / "shared" / "fixtures" / "bags"


SMALL = SyntheticBagSpec(duration_s=1.0, height=24, width=32)


def convert(
    bags: list[Path],
    contract: Contract,
    root: Path,
    *,
    task: str | None = "pick the cube",
    split: str = "one-per-bag",
    jobs: int = 1,
    append: bool = False,
    allow_duplicates: bool = False,
    codec: str = "h264",
    exact_jobs: bool = True,
    **options: Any,
) -> ConversionResult:
    """convert_bags with test defaults (h264 for speed; `jobs` workers whatever the load, as the tests of the
    parallel path need)."""
    opts = ConvertOptions(
        contract=contract,
        stamp=options.pop("stamp", contract.stamp),
        task=task,
        split=SplitRule.parse(split),
        **options,
    )
    return convert_bags(
        bags,
        opts,
        root=root,
        repo_id="test/bags",
        append=append,
        allow_duplicates=allow_duplicates,
        codec=codec,
        jobs=jobs,
        exact_jobs=exact_jobs,
    )


def orphan_probe(converter: int) -> None:
    """A --jobs worker stand-in: registers to die with the converter as a bag worker does, then runs forever."""
    import time

    from lerobot_bags.pipeline import die_with

    die_with(converter)
    while True:
        time.sleep(0.05)
