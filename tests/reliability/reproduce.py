"""Re-run one fuzz input in this process: python tests/reliability/reproduce.py TARGET SEED INDEX.

TARGET is a target's name from the counts table (test_fuzz.TARGETS: bag_storage, bag_metadata, bag_semantics,
contracts, recorder_messages, executor_chunks, policy_server_frames, recorder_dead_sensors). Prints the outcome,
the input and the traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_harness import reproduce
from test_fuzz import TARGETS

if __name__ == "__main__":
    name, seed, index = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    outcome, described, detail = reproduce(TARGETS[name], seed, index)
    print(f"{name} seed {seed} index {index}: {outcome}\ninput: {described}\n{detail}")
