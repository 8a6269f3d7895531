"""Single-bit flips in a small synthetic bag's storage file, each converted by `convert_bags`: what happens.

Each trial copies a clean bag (0.5 s: JointState state and commands @ 100 Hz, one 16x12 rgb8 camera @ 30 fps,
stored as an `image` feature so pixels compare exactly), flips one random bit of its mcap or db3 file and
converts it. Outcomes, counted:

* "bag failed (clear error)": BagError or a FAILED bag (damaged storage, a broken definition, ...);
* "refused N messages": the converter refused damaged messages (counted per reason in the report);
* "unchanged output": the flip hit bytes nothing reads (padding, metadata the converter ignores, ...);
* "changed output, nothing refused": a changed pixel, number or stamp: undetectable without checksums (rosbags
  writes mcap chunks with CRC 0, sqlite3 has none) -- broken down by the feature that changed;
* "crash": any other exception (must be 0).

Usage: python bench/fuzz_bag_bitflips.py [--trials N] [--storage mcap|sqlite3] [--seed S]
Results: bench/results/fuzz_bag_bitflips.json (appended per storage and seed).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lerobot_recorder" / "bags"))

from bag_helpers import convert  # noqa: E402

from lerobot_bags.errors import BagError  # noqa: E402
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for, write_synthetic_bag  # noqa: E402
from lerobot_dataset import DatasetReader  # noqa: E402

KEYS = ("observation.state", "action", "observation.images.front")


def _frames(root: Path) -> list[dict[str, Any]]:
    with DatasetReader(root) as reader:
        return [{key: np.asarray(reader[i][key]) for key in KEYS} for i in range(len(reader))]


def run(trials: int, storage: str, seed: int) -> dict[str, Any]:
    """Flip `trials` random bits, one per copy of the bag; returns the outcome counts."""
    base = Path(tempfile.mkdtemp(prefix="bitflips-"))
    try:
        spec = SyntheticBagSpec(duration_s=0.5, height=12, width=16, cameras=("front",), storage=storage)
        good = write_synthetic_bag(base / "good", spec)
        contract = contract_for(spec, camera_dtype="image")
        convert([good], contract, base / "clean")
        clean = _frames(base / "clean")
        storage_file = next(p for p in good.iterdir() if p.suffix in (".mcap", ".db3"))
        data = storage_file.read_bytes()
        rng = random.Random(seed)
        counts: dict[str, int] = {}
        crashes: list[str] = []

        def count(outcome: str) -> None:
            counts[outcome] = counts.get(outcome, 0) + 1

        for trial in range(trials):
            bag, root = base / f"bag{trial}", base / f"ds{trial}"
            shutil.copytree(good, bag)
            damaged = bytearray(data)
            offset = rng.randrange(len(damaged))
            damaged[offset] ^= 1 << rng.randrange(8)
            (bag / storage_file.name).write_bytes(bytes(damaged))
            try:
                result = convert([bag], contract, root)
            except BagError:
                count("bag failed (clear error)")
                continue
            except Exception as err:  # what this bench looks for
                count("crash")
                crashes.append(f"offset {offset}: {type(err).__name__}: {err}\n{traceback.format_exc(limit=-3)}")
                continue
            finally:
                shutil.rmtree(bag)
            if result.failed or not result.episodes:
                count("bag failed (clear error)")
            elif any(result.bags[0].get("refused_messages", {}).values()):
                count("refused damaged messages")
            else:
                got = _frames(root)
                if len(got) != len(clean):
                    count("changed output, nothing refused: frame count")
                else:
                    changed = sorted(
                        {
                            k.split(".")[-1]
                            for a, b in zip(got, clean, strict=True)
                            for k in KEYS
                            if not np.array_equal(a[k], b[k])
                        }
                    )
                    count(f"changed output, nothing refused: {'+'.join(changed)}" if changed else "unchanged output")
            shutil.rmtree(root, ignore_errors=True)
        return {
            "storage": storage,
            "seed": seed,
            "trials": trials,
            "file_bytes": len(data),
            "counts": dict(sorted(counts.items())),
            "crashes": crashes,
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    report = run(args.trials, args.storage, args.seed)
    print(json.dumps({k: v for k, v in report.items() if k != "crashes"}, indent=1))
    for crash in report["crashes"]:
        print(crash)
    out = REPO / "bench" / "results" / "fuzz_bag_bitflips.json"
    runs = json.loads(out.read_text())["runs"] if out.exists() else []
    runs.append(report)
    out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
