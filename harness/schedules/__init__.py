"""Which schedules a session runs: the kills and faults of one run, the modes that draw them (given,
exhaustive, random, timed) and the hunt that searches and shrinks them.
"""
