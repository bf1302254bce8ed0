"""What the harness serves one run's agent: the scripted model, the tool service, and the seams between them.

Both services live in the harness, outside the agent's process tree, for the
whole run: a kill ends the agent, never them, so the ledger they write and the
exchanges they keep survive it. The harness drives them through four moments:
``begin`` before each incarnation starts, ``strike`` once the kill's moment has
come and before the tree is killed (no held request goes on, no tool call acts
past it: every effect is in the ledger before the kill marker), ``exchanges``
for the evidence, and ``close``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from killpoint.harness.agents.model_endpoint import ModelEndpoint
from killpoint.harness.agents.script import Script
from killpoint.harness.agents.seam_client import SeamClient
from killpoint.harness.agents.seams import SeamHook, free_running
from killpoint.harness.agents.tool_service import ToolService

TOOLS_URL_ENV = "KILLPOINT_TOOLS_URL"
MODEL_URL_ENV = "KILLPOINT_MODEL_URL"
API_KEY = "killpoint-scripted-model"  # the SDKs refuse to start without a key; the scripted model reads none


@dataclass
class AgentServices:
    model: ModelEndpoint
    tools: ToolService
    seams: SeamClient | None  # None: a run nothing holds (the services' own tests)

    @classmethod
    def start(cls, plan: dict[str, Any], world: Path, ledger: Path, control: Path | None) -> AgentServices:
        """Both services of a run, held at their seams on ``control`` (None: a run nothing holds)."""
        seams = SeamClient(str(control)) if control is not None else None
        hook: SeamHook = seams if seams is not None else free_running
        tools = ToolService(plan, world, ledger, hook)
        model = ModelEndpoint(Script.from_plan(plan), hook=hook)
        services = cls(model, tools, seams)
        tools.start()
        try:
            model.start()
        except BaseException:
            tools.close()
            raise
        return services

    def environment(self) -> dict[str, str]:
        """How an unmodified agent is pointed at the services: the SDKs' own base-URL settings, and the tools' URL."""
        return {
            "OPENAI_BASE_URL": f"{self.model.url}/v1", "OPENAI_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": self.model.url, "ANTHROPIC_API_KEY": API_KEY,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the Agents SDK would export traces to the real API
            MODEL_URL_ENV: self.model.url, TOOLS_URL_ENV: self.tools.url,
            "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1",
        }

    def begin(self, incarnation: int) -> None:
        if self.seams is not None:
            self.seams.begin(incarnation)
        self.tools.begin(incarnation)

    def strike(self) -> None:
        """The kill's moment has come: end every held request, and let every tool call acting finish."""
        if self.seams is not None:
            self.seams.struck()
        self.tools.freeze()

    def exchanges(self) -> list[dict[str, Any]]:
        """What the agent asked and was answered, model and tools, as the evidence quotes it."""
        return [*({"service": "model", **exchange} for exchange in self.model.exchanges),
                *({"service": "tools", **exchange} for exchange in self.tools.exchanges)]

    def close(self) -> None:
        try:
            self.model.close()
        finally:
            self.tools.close()
