"""The fake tools as a stdio MCP server an agent starts as its own child: a shim that forwards each message.

    {python} -m killpoint.harness.agents.mcp_stdio

An agent whose MCP servers are commands it starts is given this one (with
``$KILLPOINT_MCP_URL`` in the environment it hands the server, which an MCP
client does not pass on by itself). Each newline-delimited JSON-RPC message
read from stdin is posted to the harness's MCP endpoint (``mcp_endpoint``) and
its answer, if any, written to stdout: every call, its seams and its ledger
lines are the harness's, outside the agent's tree. The shim holds no state, so
it dies with the agent, as a real stdio server would, and loses nothing the
ledger already holds.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from typing import BinaryIO

from killpoint.protocol import ENV_MCP_URL

TIMEOUT_S = 300.0  # a call held at a crash point waits for the harness's reply, as an MCP client's read does


def forward(line: bytes, url: str) -> bytes:
    """The endpoint's answer to one message (empty for a notification's 202)."""
    request = urllib.request.Request(url, data=line, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as error:  # a JSON-RPC error the endpoint answered with a 4xx
        return bytes(error.read())


def serve(url: str, stdin: BinaryIO, stdout: BinaryIO) -> None:
    for line in stdin:
        if not line.strip():
            continue
        answer = forward(line.strip(), url)
        if answer.strip():
            stdout.write(answer.strip() + b"\n")
            stdout.flush()


def main() -> int:
    url = os.environ.get(ENV_MCP_URL)
    if not url:
        print(f"mcp_stdio: ${ENV_MCP_URL} is not set: start this server with the environment killpoint gives the "
              f"workload (an MCP client passes only a few variables to a server; pass this one on)", file=sys.stderr)
        return 2
    serve(url, sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
