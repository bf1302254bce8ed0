"""A correct runtime whose recovery rebuilds a cache of many small files in its run directory: the reference
runtime, which in every incarnation after the first writes N files (argv[1]) into ``$KILLPOINT_RUN_DIR/cache``
before it recovers; with ``--then-hang`` its first recovery then hangs for good (a real bug, for the harness to
name), and the next one, started after that incarnation's timeout, recovers.

Nothing about the files needs to be durable, so without the hang it passes every kill. On a plain folder a create
costs tens of microseconds; on the lazy file system of a power loss it is several FUSE round trips, which is
what makes the rebuild slow there.
"""

import os
import sys
import time

from killpoint import protocol
from killpoint.scenarios.reference_runtime import main

incarnation = int(os.environ[protocol.ENV_INCARNATION])
if incarnation > 0:
    cache = os.path.join(os.environ[protocol.ENV_RUN_DIR], "cache")
    os.makedirs(cache, exist_ok=True)
    for number in range(int(sys.argv[1])):
        with open(os.path.join(cache, f"entry-{number}"), "w") as entry:
            entry.write(f"{number}\n")
    if "--then-hang" in sys.argv and incarnation == 1:
        time.sleep(3600)
sys.exit(main())
