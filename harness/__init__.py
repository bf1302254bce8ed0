"""killpoint's driver, by role: config, schedules, execute, faults, backends, judge, agents, certify, reporting,
repro and frontends, over the values in ``model`` and the run layout in ``layout`` (docs/architecture.md)."""
