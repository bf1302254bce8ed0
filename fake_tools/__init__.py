"""Fake tools that act on a sandboxed fake world and record every side effect in a ledger."""

from fake_tools.base import FakeTool, ToolResult, invoke, lookup, verify
from fake_tools.world import World, diff_snapshots, seed_world

__all__ = ["FakeTool", "ToolResult", "World", "diff_snapshots", "invoke", "lookup", "seed_world", "verify"]
