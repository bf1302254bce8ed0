"""The reference runtime with the control socket hidden from it: it runs freely, never rendezvousing."""

import os
import sys

from harness import protocol
from scenarios.reference_runtime import main

os.environ.pop(protocol.ENV_CONTROL, None)
sys.exit(main())
