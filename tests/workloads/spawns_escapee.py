"""The reference runtime that first starts a helper in a new session (out of its
process group) which would outlive it: the harness must still kill it."""

import subprocess
import sys

from killpoint.scenarios.reference_runtime import main

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
sys.exit(main())
