"""The reference runtime, first printing its string hash: the same in every incarnation, on every backend."""

import sys

from killpoint.scenarios.reference_runtime import main

print(hash("killpoint"), flush=True)
sys.exit(main())
