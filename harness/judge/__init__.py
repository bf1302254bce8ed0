"""Where a verdict is decided: the evidence read from a run directory (journal, ledger, world, a
runtime's own store), validated, and the checker's rules applied to it.
"""
