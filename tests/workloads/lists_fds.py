"""The reference runtime, after printing the descriptors it was started with."""

import os
import sys

from killpoint.scenarios.reference_runtime import main

descriptors = sorted(int(name) for name in os.listdir("/proc/self/fd"))  # includes listdir's own
print("descriptors:", descriptors[:-1], flush=True)
sys.exit(main())
