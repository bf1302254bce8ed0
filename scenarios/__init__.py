"""Workloads under test: the reference runtime, its mutants, and scenario files."""

__killpoint_warm__ = True  # defines nothing that reads the environment: the fork server may keep it imported
