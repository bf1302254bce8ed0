"""``python -m killpoint.scenarios.reference_runtime``: run the reference runtime on the protocol environment."""

import sys

from killpoint.scenarios.reference_runtime import main

sys.exit(main())
