"""A workload's own module that reads the protocol environment when it is imported, as user code may."""

import os

RUN_DIR = os.environ.get("KILLPOINT_RUN_DIR")
