"""Judging an unmodified agent at its network seams: the scripted model it asks what to do, served over the
wire formats real agents speak, so the harness sees (and can hold) every request without touching the agent."""
