"""`python -m lerobot_ros.node_kit`: parameter tables as Markdown, and the README sections that show them.

python -m lerobot_ros.node_kit markdown lerobot_drivers.nodes.arm_driver:ArmDriverParameters
python -m lerobot_ros.node_kit readme --check docs/packages/*.md
python -m lerobot_ros.node_kit readme --write docs/packages/*.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lerobot_ros.node_kit.readme import render, update


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lerobot_ros.node_kit", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("markdown", help="print a node's parameter table as Markdown")
    p.add_argument("target", metavar="MODULE:CLASS", help="the node's parameter dataclass")
    p = verbs.add_parser("readme", help="check (or rewrite) the generated parameter tables of READMEs")
    p.add_argument("readmes", nargs="+", type=Path)
    p.add_argument("--write", action="store_true", help="rewrite stale sections instead of failing")
    args = parser.parse_args(argv)
    try:
        if args.verb == "markdown":
            sys.stdout.write(render(args.target))
            return 0
        code = 0
        for path in args.readmes:
            for target in update(path, write=args.write):
                verb = "rewrote" if args.write else "stale"
                sys.stderr.write(f"{path}: {verb} the parameter table of {target}\n")
                code = 0 if args.write else 1
        return code
    except (LookupError, ValueError, OSError) as err:
        sys.stderr.write(f"error: {err}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
