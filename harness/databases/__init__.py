"""Database servers the harness runs for a session's runs, outside every workload's process tree."""
