"""Names of workload protocol v1, in one place (docs/protocol.md explains them).

Both sides import this: the harness, and the stdlib-only workload client. It must
stay free of third-party imports so a workload pays nothing for it. There is no
version constant: the v1 spec gives a workload no field to announce one, so the
harness would have nothing to check it against.
"""

from __future__ import annotations

ENV_RUN_DIR = "KILLPOINT_RUN_DIR"
ENV_PLAN = "KILLPOINT_PLAN"
ENV_CATALOGUE = "KILLPOINT_CATALOGUE"
ENV_WORLD = "KILLPOINT_WORLD"
ENV_LEDGER = "KILLPOINT_LEDGER"
ENV_CONTROL = "KILLPOINT_CONTROL"
ENV_INCARNATION = "KILLPOINT_INCARNATION"
# "1" when the fake world is on the device a power loss drops from (a scenario's world_on_device): the fake
# tools then fsync every world write and its folder, as durable tools must.
ENV_WORLD_DURABLE = "KILLPOINT_WORLD_DURABLE"
# Where this incarnation may be killed, so it need wait for the harness's reply only there (an extension of
# v1 that every v1 workload ignores): JSON {"at": [[point, call or null], ...]}. A client waits at a listed
# point; at every other it sends its message with "wait": false and goes on, unanswered. Unset: wait at every
# point, as v1 does.
ENV_ARMED = "KILLPOINT_ARMED"
ARMED_NOW = "now"  # in $KILLPOINT_ARMED, true: at an armed point, send it and SIGKILL yourself, reading no reply
NO_WAIT_FIELD = "wait"  # a crash-point message's field: false means the sender does not read a reply to it
SENT_FIELD = "sent"  # with "wait": false, the sender's time.monotonic() at sending, which orders it among other senders'
# The fake tools served by the harness over HTTP for the whole run (an extension of v1; a workload that ignores
# it calls their command line): POST $KILLPOINT_TOOLS_URL/calls/TOOL with {"call", "op", "args"} answers
# {"ok", "output", "error"}, POST .../probes/TOOL with {"call", "args"} answers {"effect_found"}.
ENV_TOOLS_URL = "KILLPOINT_TOOLS_URL"
ENV_MCP_URL = "KILLPOINT_MCP_URL"  # the same tools as an MCP server over streamable HTTP (harness/agents/mcp_endpoint)
# The workload's database, when its scenario has a [database] (harness/databases): a libpq / SQLAlchemy URL.
ENV_DATABASE_URL = "KILLPOINT_DATABASE_URL"
# Every incarnation hashes strings the same way, so a workload iterating a set behaves the same each run.
WORKLOAD_HASH_SEED = "0"

JOURNAL_NAME = "journal.jsonl"

# The crash points of one tool call, in the order a correct runtime reaches them.
BEFORE_STARTED = "before_started"
AFTER_STARTED = "after_started"
AFTER_EFFECT = "after_effect"  # sent by the fake tool itself, once it has acted
BEFORE_FINISHED = "before_finished"
AFTER_FINISHED = "after_finished"
CALL_POINTS = (BEFORE_STARTED, AFTER_STARTED, AFTER_EFFECT, BEFORE_FINISHED, AFTER_FINISHED)
# Crash points of the recovery itself.
AFTER_DECISIONS = "after_decisions"
AFTER_VERIFY = "after_verify"
RECOVERY_POINTS = (AFTER_DECISIONS, AFTER_VERIFY)
# The crash points of one step of a durable-execution framework (LangGraph, DBOS), announced by
# killpoint.frameworks: the step entered (before its effect), about to return to the framework, its result
# handed to the framework's saver but not yet saved (LangGraph's checkpointer: put_writes called; a framework
# with no saver of its own, DBOS, has no such point), and the framework's own record of its result committed
# (from a checkpointer wrapper or the call site).
STEP_ENTERED = "step_entered"
STEP_RETURNED = "step_returned"
STEP_SAVING = "step_saving"
STEP_RECORDED = "step_recorded"
STEP_POINTS = (STEP_ENTERED, STEP_RETURNED, STEP_SAVING, STEP_RECORDED)
# The crash points at an unmodified agent's network seams, announced for it by the services the harness runs
# (harness/agents/seams.py says what each means), in the order one tool call crosses them; then the one inside
# its own store, where the scenario names one (harness/agents/store_seam.py): the store first holds the result.
MODEL_REQUEST = "model_request"
MODEL_REPLY = "model_reply"
TOOL_REQUEST = "tool_request"
TOOL_OPENED = "tool_opened"  # a real server behind the recording proxy, held at its first open in the world
TOOL_EFFECT = "tool_effect"
TOOL_REPLY = "tool_reply"
STORE_RESULT = "store_result"
SEAM_POINTS = (MODEL_REQUEST, MODEL_REPLY, TOOL_REQUEST, TOOL_OPENED, TOOL_EFFECT, TOOL_REPLY, STORE_RESULT)
# The seams where the agent waits on a request the harness holds: a kill there lands at the same place every time.
# At the others the agent runs on until the SIGKILL lands: it already has the reply, or its store is caught
# wherever a watch of it catches it.
HELD_SEAM_POINTS = (MODEL_REQUEST, TOOL_REQUEST, TOOL_EFFECT)
ALL_POINTS = CALL_POINTS + RECOVERY_POINTS + STEP_POINTS + SEAM_POINTS
# The points that may come with no call: the recovery's decisions, and an agent's model request and reply that
# choose no planned call (the final answer, or only read-only probes).
CALLLESS_POINTS = (AFTER_DECISIONS, MODEL_REQUEST, MODEL_REPLY)

# The harness's replies to a crash point: go on, or SIGKILL your own process group now (a non-pausing
# kill, ``c3:after_effect/now``: no thread of the workload may run on, as none would in a real crash).
REPLY_OK = b"ok\n"
REPLY_KILL = b"kill\n"

READ_ONLY = "READ_ONLY"
IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
NON_IDEMPOTENT = "NON_IDEMPOTENT"
UNKNOWN = "UNKNOWN"
CLASSES = (READ_ONLY, IDEMPOTENT_WRITE, NON_IDEMPOTENT, UNKNOWN)

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
NOT_STARTED = "NOT_STARTED"
RUNNING = "RUNNING"
# What a journal scan reports for an operation left RUNNING by a crash.
OUTCOME_UNKNOWN = "UNKNOWN"

SKIP = "SKIP"
RETRY = "RETRY"
VERIFY = "VERIFY"

# Journal record kinds.
STARTED = "started"
FINISHED = "finished"
DECISION = "decision"
VERIFIED = "verified"
TASK = "task"
COMPLETED = "COMPLETED"

# Ledger record kinds: each ledger line is keyed by exactly one of these. The fake tools write the
# first three (a call's invocation, an effect it made, a read-only probe); the harness writes KILLED.
LEDGER_INVOKED = "invoked"
LEDGER_EFFECT = "effect"
LEDGER_PROBE = "probe"
LEDGER_KILLED = "killed"
TOOL_LEDGER_KINDS = (LEDGER_INVOKED, LEDGER_EFFECT, LEDGER_PROBE)
