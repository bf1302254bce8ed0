"""A runtime that journals each call's state in a SQLite table of its own, judged through the scenario's [journal] mapping."""
