"""Framework workloads: the plan carried out as a LangGraph graph, a LangGraph entrypoint or a DBOS workflow.

Each step is one planned call running its fake tool (``killpoint.frameworks.fake_step``);
``--guarded`` gives every step the fake tool's read-only probe, the correct recovery.
"""
