"""A workload that hangs before doing anything."""

import time

time.sleep(3600)
