"""What people read: the summary, the coverage map, the text, JSON and HTML reports, the progress
lines, ``show`` of one run directory, and ``merge`` of a session's shards.
"""
