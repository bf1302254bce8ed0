"""killpoint's driver: scenarios, schedules, runner, nemesis, evidence, checker, report, CLI."""
