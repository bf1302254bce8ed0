"""Mutant runtimes: each is the reference runtime with exactly one realistic bug.

Each module names its bug and the property the checker must report for it
(``CAUGHT_BY``); tests/integration/test_mutants.py holds every mutant to it.
Run one with ``python -m scenarios.mutants.NAME`` under killpoint.
"""
