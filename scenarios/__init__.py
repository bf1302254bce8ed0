"""Workloads under test: the reference runtime, its mutants, and scenario files."""
