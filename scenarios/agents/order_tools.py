"""The order agents' tools as plain functions that call an HTTP API (here killpoint's tool service).

Each framework's agent wraps them in its own tool decorator, as a user who
already has such functions does; the docstrings are what the model is told.
"""

from __future__ import annotations

import json
import os
import urllib.request


def call_api(tool: str, **args: str) -> str:
    request = urllib.request.Request(f"{os.environ['KILLPOINT_TOOLS_URL']}/tools/{tool}",
                                     data=json.dumps(args).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return response.read().decode()


def read_file(path: str) -> str:
    """Read a text file."""
    return call_api("read_file", path=path)


def write_file(path: str, content: str) -> str:
    """Write a whole text file."""
    return call_api("write_file", path=path, content=content)


def append(path: str, text: str) -> str:
    """Append text to a file."""
    return call_api("append", path=path, text=text)


ORDER_TOOLS = (read_file, write_file, append)
