"""Call the fake tools from the command line, so a runtime in any language can use them.

    python -m killpoint.fake_tools call TOOL --call CALL_ID [--op OP] --args JSON
    python -m killpoint.fake_tools probe TOOL --call CALL_ID --args JSON

Both take the world, ledger, control socket and incarnation from the protocol
environment the harness gave the workload (KILLPOINT_WORLD, KILLPOINT_LEDGER,
KILLPOINT_CONTROL, KILLPOINT_INCARNATION) and print one JSON line:

- ``call`` runs the tool and prints ``{"ok", "output", "error"}``; it exits 0
  when the call succeeded and 1 when it FAILED.
- ``probe`` runs the tool's read-only check and prints ``{"effect_found"}``.

Bad usage exits 2, never 1 (which a runtime reads as a FAILED call) and never a
traceback: an unknown command; arguments that are not one JSON object (NaN, a
key given twice, nesting past the parser's depth); no protocol environment, a
ledger it cannot open, or a control socket it cannot reach. Such a call runs
nothing: ``call`` connects to the harness before the tool acts.

The gotcha: ``call`` sends the ``after_effect`` crash point itself, on its own
connection to the control socket, and waits there for the harness. That is safe
because this process runs in the workload's process group, so the SIGKILL that
ends the workload at that point ends it too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from killpoint import protocol
from killpoint._json import strict_json
from killpoint.client import Rendezvous, WorkloadEnv
from killpoint.fake_tools.base import invoke, verify
from killpoint.fake_tools.ledger import Ledger
from killpoint.fake_tools.world import World

EXIT_OK, EXIT_FAILED = 0, 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m killpoint.fake_tools", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    call = commands.add_parser("call", help="run one tool call and print its result")
    probe = commands.add_parser("probe", help="check read-only whether a call's effect is in the world")
    for command in (call, probe):
        command.add_argument("tool", help="the tool id, e.g. write_file")
        command.add_argument("--call", required=True, metavar="CALL_ID", help="the planned call's call_id")
        command.add_argument("--args", required=True, type=_json_object, metavar="JSON",
                             help='the call\'s arguments as a JSON object, e.g. \'{"path": "a.txt"}\'')
    call.add_argument("--op", help="the operation id the runtime journaled (sent with the after_effect point)")
    return parser


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = strict_json(text.encode(errors="surrogateescape"))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object of arguments")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        env = WorkloadEnv.from_environ()
    except (RuntimeError, ValueError) as error:
        parser.error(f"{error}; run it from a workload that killpoint started")
    try:
        ledger = Ledger(env.ledger_path, env.incarnation)
    except OSError as error:
        parser.error(f"cannot open the ledger {protocol.ENV_LEDGER}={env.ledger_path} ({error.strerror})")
    world = World(env.world, durable=env.world_durable)
    try:
        if args.command == "probe":
            found = verify(args.tool, args.call, args.args, world=world, ledger=ledger)
            _print_line({"effect_found": found})
            return EXIT_OK
        rendezvous = Rendezvous(env.control_path, env.incarnation)
        try:
            rendezvous.connect()
        except OSError as error:
            parser.error(f"cannot reach the harness at {protocol.ENV_CONTROL}={env.control_path} ({error.strerror})")
        try:
            result = invoke(args.tool, args.call, args.args, world=world, ledger=ledger,
                            rendezvous=rendezvous, op=args.op)
        except ConnectionError as error:  # at after_effect: the tool has acted, the harness is gone
            parser.error(f"lost the harness at {protocol.ENV_CONTROL}={env.control_path} after the call acted ({error})")
        finally:
            rendezvous.close()
        _print_line({"ok": result.ok, "output": result.output, "error": result.error})
        return EXIT_OK if result.ok else EXIT_FAILED
    finally:
        ledger.close()


def _print_line(answer: dict[str, Any]) -> None:
    # default=str: a tool's output is shown to the runtime, never a reason to crash here.
    print(json.dumps(answer, default=str), flush=True)


if __name__ == "__main__":
    sys.exit(main())
