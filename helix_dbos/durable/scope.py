"""The run a piece of workflow code works for, and the pure helpers that shape what a
step writes: messages, events and usage. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Awaitable, Callable
from typing import Any

from helix_dbos.agents import AgentConfig
from helix_dbos.durable.payloads import RunRequest
from helix_dbos.durable.tool_execution.step import ToolJob
from helix_dbos.events import ErrorEvent, Event, FinishEvent
from helix_dbos.orchestration import StepProcessingPlan, create_tool_result_message
from helix_dbos.state import StateTracker
from helix_dbos.store.records import Terminal
from helix_dbos.tools import HookContext, ReadOnlyState, Tool
from helix_dbos.types import (
    AssistantMessage,
    Message,
    ParsedToolCall,
    StepInfo,
    StepResult,
    ToolResultMessage,
    Usage,
)


RunWorkflow = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""A run's workflow function: takes a ``RunRequest`` as JSON, returns the run's result."""

WAITING_READ_ONLY = "on_agent_suspended and on_agent_resumed observe a step while it waits, before it commits"


@dataclass(frozen=True)
class RunScope:
    """One run of one agent, as workflow code sees it."""

    agent: AgentConfig
    request: RunRequest
    run_workflow: RunWorkflow
    """The workflow that runs a run (``helix_agent_run``): a sub-agent's or a companion's
    run is started as one, a child of this run's workflow."""
    first_execution: bool = False
    """This execution of the run's workflow is its first (not a recovery, not a resume):
    none of its steps ran before (``AgentRuntime.first_execution``)."""

    @property
    def session_id(self) -> str:
        return self.request.session_id

    @property
    def root_session_id(self) -> str:
        return self.request.root_session_id or self.request.session_id

    def tool(self, name: str) -> Tool:
        found = self.agent.get_tool(name)
        assert found is not None, f"the loop only schedules known tools, not {name!r}"
        return found

    def job(self, step_no: int, call: ParsedToolCall, base_state: Any) -> ToolJob:
        return ToolJob(
            self.agent.name, self.session_id, self.request.run, step_no, call, base_state,
            ran_before=not self.first_execution,
        )

    def hook_context(self, step_no: int, state: Any) -> HookContext:
        """What ``on_agent_suspended`` / ``on_agent_resumed`` see: the state before the
        step, read-only (the hooks after the commit write through ``durable/hook_state.py``)."""
        return HookContext(
            self.session_id, self.agent.name, step_no, ReadOnlyState(StateTracker(state).get_state(), WAITING_READ_ONLY)
        )




def unknown_tool_message(call: ParsedToolCall) -> ToolResultMessage:
    return create_tool_result_message(
        call.id, call.name, success=False, error=f"Unknown tool: {call.name!r} is not a tool of this agent"
    )


def in_call_order(results: list[ToolResultMessage], plan: StepProcessingPlan) -> list[ToolResultMessage]:
    message_plan = plan.assistant_message_plan
    if message_plan is None:
        return results
    order = {c.id: i for i, c in enumerate(message_plan.tool_calls)}
    order.update({c.id: len(order) + i for i, c in enumerate(message_plan.sub_agent_calls)})
    return sorted(results, key=lambda m: order.get(m.tool_call_id, len(order)))


def tool_calls_of(messages: list[Message]) -> list[ParsedToolCall]:
    return [call for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls]








def step_info(
    step_no: int, first: bool, step_result: StepResult, usage: Usage, messages: list[Message]
) -> StepInfo:
    """What ``on_step_finish`` gets: the step's result, usage and appended ``messages``."""
    assistant = next((m for m in messages if isinstance(m, AssistantMessage)), None)
    thinking = getattr(step_result, "thinking", None)
    return StepInfo(
        step=step_no,
        step_type="initial" if first else "tool_result",
        type=step_result.type,
        text=(assistant.content if assistant is not None else None) or "",
        reasoning=thinking.content if thinking is not None else None,
        tool_calls=tool_calls_of(messages),
        tool_results=[m for m in messages if isinstance(m, ToolResultMessage)],
        stop_reason=step_result.stop_reason,
        error=getattr(step_result, "error", None),
        usage=usage,
        messages=messages,
    )


def terminal_events(terminal: Terminal | None, usage: Usage) -> list[tuple[str, Event]]:
    """The event that ends the run, if the step ends it; ``finish`` carries the run's usage."""
    if terminal is None:
        return []
    if terminal.status == "completed":
        usage_json = usage.model_dump(mode="json")
        return [("end", FinishEvent(output=terminal.output, stop_reason=terminal.stop_reason, usage=usage_json))]
    return [("end", ErrorEvent(error=terminal.error, stop_reason=terminal.stop_reason))]


def step_usage(model: str, usage: Usage, step_result: StepResult) -> dict[str, Any]:
    """What the model used in a step, as its ``step_finish`` event says (``usage``): its
    tokens, cost and latency and its name; ``"success": false`` when the call failed. The
    usage ledger (``helix.session_usage``) reads the step's model row from it, its client
    tools' waits from ``usage.waits`` (the commit adds them) and a row for each tool call
    the step ran from its ``tool_result`` event::

        >>> from helix_dbos.types import TextStepResult
        >>> step_usage("openai/gpt-4o", Usage(input_tokens=9, total_tokens=9), TextStepResult(content="hi"))
        {'input_tokens': 9, 'output_tokens': 0, 'total_tokens': 9, 'cost_usd': None, 'latency_ms': 0.0, \
'model': 'openai/gpt-4o'}
    """
    used = {**usage.model_dump(mode="json"), "model": model}
    return used if step_result.type != "error" else {**used, "success": False}
