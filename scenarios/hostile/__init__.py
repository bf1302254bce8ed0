"""Hostile workloads: each one small runtime that attacks the harness one way (issue 14).

Each is the reference runtime plus one attack; tests/integration/test_hostile_*.py run them on every
backend the attack applies to and assert the harness refused, contained or reported it.
"""
