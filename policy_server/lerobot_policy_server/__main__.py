"""`python -m lerobot_policy_server CHECKPOINT --port P`."""

import sys

from lerobot_policy_server.cli import main

sys.exit(main())
