"""Fake tools that act on a sandboxed fake world and record every side effect in a ledger."""

# Every family registers its tools on import. Importing them with the package, rather than on the
# first lookup, means a fork server that has imported a runtime has them warm: a child that imported
# them itself would compile and run them on every incarnation.
import killpoint.fake_tools.tools  # noqa: F401  (after base: the families import it)
from killpoint.fake_tools.base import FakeTool, ToolResult, invoke, lookup, verify
from killpoint.fake_tools.world import World, diff_snapshots, seed_world

__all__ = ["FakeTool", "ToolResult", "World", "diff_snapshots", "invoke", "lookup", "seed_world", "verify"]
