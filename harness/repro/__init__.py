"""Reproducing a failure: the repro token that names a run exactly, what ``repro`` may run for one,
and whether a repro run reproduced it.
"""
