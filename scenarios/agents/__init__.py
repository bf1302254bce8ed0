"""Agents judged at their network seams (harness/agents): the reference agent and the scenarios of real ones."""
