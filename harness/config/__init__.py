"""What a user asks for: the scenario and its fields, the defaults, and the bounds of every value.

Pure data and parsing: nothing here launches, kills or judges.
"""
