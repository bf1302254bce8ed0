"""The reference runtime that deletes its own journal once the task is done (a recovery wiped it, say)."""

import os
import sys

from killpoint import protocol
from killpoint.scenarios.reference_runtime import main

code = main()
if os.environ.get(protocol.ENV_INCARNATION) != "0":
    os.unlink(os.path.join(os.environ[protocol.ENV_RUN_DIR], protocol.JOURNAL_NAME))
sys.exit(code)
