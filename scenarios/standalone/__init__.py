"""A runtime outside the harness: it journals on its own and reaches the fake tools through ``python -m killpoint.fake_tools``."""
