"""A workload that cannot start: it fails before touching the protocol."""

import sys

print("fatal: cannot load the agent configuration", file=sys.stderr)
sys.exit(3)
