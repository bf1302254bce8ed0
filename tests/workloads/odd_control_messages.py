"""The reference runtime, after sending the harness control messages that are not crash points:
a non-string point, a call that is a list, nesting past any parser, and a line with no JSON at all (naming
the run directory, which the harness quotes in its report of the message)."""

import json
import os
import socket
import sys

from killpoint import protocol
from killpoint.scenarios.reference_runtime import main

if os.environ.get(protocol.ENV_CONTROL):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
        control.connect(os.environ[protocol.ENV_CONTROL])
        replies = control.makefile("rb")
        for line in (json.dumps({"point": [protocol.AFTER_EFFECT], "call": "c1"}).encode(),
                     json.dumps({"point": protocol.AFTER_EFFECT, "call": ["c1"]}).encode(),
                     b'{"point": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                     f"{os.environ[protocol.ENV_RUN_DIR]} is not json".encode()):
            control.sendall(line + b"\n")
            assert replies.readline(), "the harness must answer every message"
sys.exit(main())
