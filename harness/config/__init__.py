"""What a user asks for: the scenario and its fields, the defaults, and the bounds of every value.

Pure data and parsing: nothing here launches or kills (a journal mapping is checked by its store reader).
"""
