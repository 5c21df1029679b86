"""One run of an agent as workflow code: deterministic, with every side effect a DBOS step.

Per agent step::

    llm step  ->  plan (pure)  ->  phase 1: regular tools, parallel, one step each
              ->  phase 2: finishWith tools, in order  ->  ONE commit transaction

The loop keeps the transcript and the state in memory. It reads them once, at the start
of the run, from the append-only logs as of the run's first step, so a recovered run
rebuilds exactly what the crashed one had before replaying its checkpointed steps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dbos import DBOS, SetWorkflowID

from helix_dbos.agents import AgentConfig
from helix_dbos.orchestration import (
    RunawayGuard,
    StepProcessingPlan,
    StopInfo,
    build_messages_for_llm,
    create_assistant_message,
    create_sub_agent_result_message,
    create_tool_result_message,
    determine_final_status,
    is_recoverable_error_stop_reason,
    max_tokens_recovery_message,
    plan_step_processing,
    resolve_finish_with,
    should_continue,
    synthesize_step_tool_results,
)
from helix_dbos.runtime.hooks import fire_hook
from helix_dbos.runtime.hitl import WAIT_FOREVER_SECONDS, answer_topic, outcome_error
from helix_dbos.runtime.requests import RunRequest, RunStart, ToolOutcome, run_workflow_id
from helix_dbos.runtime.subagents import SubAgentSpec, child_session_id
from helix_dbos.state import StateTracker, apply_step_writes, merge_step_writes, step_writes_to_rfc6902
from helix_dbos.tools import HookContext
from helix_dbos.types import (
    FINISH_TOOL_NAME,
    SUB_AGENT_TOOL_PREFIX,
    AgentResult,
    AssistantMessage,
    Message,
    ParsedSubAgentCall,
    ParsedToolCall,
    StepResult,
    TextStepResult,
    ToolResultMessage,
    Usage,
)

if TYPE_CHECKING:
    from helix_dbos.runtime.executor import DBOSAgentExecutor

logger = logging.getLogger("helix_dbos")

SNAPSHOT_EVERY_STEPS = 100
"""A full copy of the state is stored every this many steps; patches cover the rest."""


@dataclass
class Terminal:
    """How a run ends, when a step ends it."""

    status: str
    output: Any = None
    error: str | None = None
    stop_reason: str | None = None

    def as_payload(self) -> dict[str, Any]:
        return {"status": self.status, "output": self.output, "error": self.error, "stop_reason": self.stop_reason}


@dataclass
class StepOutput:
    """Everything one agent step produced, before it is committed."""

    messages: list[Message] = field(default_factory=list)
    writes: list[Any] = field(default_factory=list)
    usage_rows: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[ToolOutcome] = field(default_factory=list)
    results: list[ToolResultMessage] = field(default_factory=list)
    resolved: list[dict[str, str]] = field(default_factory=list)
    terminal: Terminal | None = None
    extra_messages: list[Message] = field(default_factory=list)


class AgentLoop:
    """Runs one :class:`RunRequest` to its end. Created inside the workflow."""

    def __init__(self, executor: DBOSAgentExecutor, agent: AgentConfig, request: RunRequest) -> None:
        self.ex = executor
        self.agent = agent
        self.req = request
        self.messages: list[Message] = []
        self.state: dict[str, Any] = {}
        self.step_count = 0
        self.steps: list[StepResult] = []
        self.usage = Usage()
        self.last_usage = Usage()
        self.guard = RunawayGuard()

    async def run(self, start: RunStart) -> AgentResult:
        self.step_count = start.step_count
        self.messages, self.state = await asyncio.to_thread(
            self.ex.load_run_context, self.req.session_id, start.message_seq, start.step_count
        )
        while True:
            step_no = self.step_count + 1
            out = await self._run_step(step_no)
            interrupted = await self._commit(step_no, out)
            await self._after_commit(step_no, out)
            if out.terminal is not None:
                return self._result(out.terminal)
            if interrupted:
                return self._result(Terminal(status="interrupted", stop_reason="interrupted"))

    # --- one step ---------------------------------------------------------------------

    async def _run_step(self, step_no: int) -> StepOutput:
        step_result, usage = await self._call_llm()
        self.steps.append(step_result)
        self.usage = self.usage + usage
        self.last_usage = usage
        plan = plan_step_processing(step_result, output_schema=self.agent.output_schema)
        out = StepOutput()
        out.usage_rows.append(_llm_usage_row(self.agent.llm_config.model, usage, step_result))
        out.events.append({"type": "step_start", "data": {"step": step_no}})
        if plan.assistant_message_plan is not None:
            assistant = create_assistant_message(plan.assistant_message_plan)
            out.messages.append(assistant)
            out.events.extend(_assistant_events(assistant))
        await self._run_tools(step_no, plan, out)
        out.terminal = await self._decide(step_result, plan, out)
        out.events.append({"type": "step_finish", "data": _step_finish_data(step_no, step_result, usage)})
        out.events.extend(_terminal_events(out.terminal))
        return out

    async def _call_llm(self) -> tuple[StepResult, Usage]:
        messages = build_messages_for_llm(self.messages, self.agent.system_prompt_for, self.state)
        return await DBOS.run_step_async(
            {"name": "llm"}, self.ex.call_llm, self.agent.name, messages
        )

    async def _run_tools(self, step_no: int, plan: StepProcessingPlan, out: StepOutput) -> None:
        regular, finishers, unknown, children = self._classify(plan.pending_tool_calls)
        children += plan.pending_sub_agent_calls
        base = StateTracker(self.state).get_state()  # one shared read-only view for every tool
        gates = await self._gate(step_no, regular, base)
        free = [c for c in regular if c.id not in gates]
        gated = [c for c in regular if c.id in gates]
        if gated:
            await self._suspend(step_no, gated, gates)
        running = self._start_parallel(step_no, free, base)  # step ids fixed before any wait
        answers = [await self._wait_for_answer(call, gates[call.id]) for call in gated]
        phase1 = list(await running)
        if gated:
            await fire_hook(self.agent.hooks, "on_agent_resumed", _suspension_reason(gates), self._hook_ctx(step_no))
            phase1 += await self._settle_gated(step_no, gated, gates, answers, base)
            out.resolved = [{"tool_call_id": c.id, "status": "answered" if a else "timed_out"} for c, a in zip(gated, answers)]
        order = {c.id: i for i, c in enumerate(regular)}
        phase1.sort(key=lambda o: order[o.tool_call_id])
        phase1_writes = merge_step_writes([o.writes for o in phase1])
        state = apply_step_writes(self.state, phase1_writes)
        writes = list(phase1_writes)
        phase2: list[ToolOutcome] = []
        for call in finishers:
            outcome = await self._run_tool_step(step_no, call, state)
            phase2.append(outcome)
            if outcome.writes:
                state = apply_step_writes(state, outcome.writes)
                writes = merge_step_writes([writes, outcome.writes])
        out.outcomes = phase1 + phase2
        out.writes = writes
        results: list[ToolResultMessage] = [_result_message(o) for o in out.outcomes]
        results += [_unknown_tool_message(call) for call in unknown]
        results += await self._run_children(step_no, children, out)
        results += synthesize_step_tool_results(plan)
        out.results = _in_call_order(results, plan)
        out.messages.extend(out.results)
        for outcome in out.outcomes:
            if outcome.executed:
                out.usage_rows.append(_tool_usage_row(outcome))
            out.events.extend(outcome.events)
        out.events.extend(_tool_result_events(out.results))
        if writes:
            out.events.append({"type": "state_patch", "data": {"patches": step_writes_to_rfc6902(writes)}})

    # --- sub-agents -------------------------------------------------------------------

    async def _run_children(
        self, step_no: int, calls: list[ParsedSubAgentCall], out: StepOutput
    ) -> list[ToolResultMessage]:
        """Start each child as a DBOS child workflow (at most ``max_tool_concurrency`` at
        once, started and awaited in call order, so replay is deterministic)."""
        results: list[ToolResultMessage] = []
        dispatched: list[tuple[ParsedSubAgentCall, RunRequest]] = []
        for call in calls:
            request, error = self._child_request(call)
            if request is None:
                logger.error("subagent.dispatch_failed session=%s call=%s: %s", self.req.session_id, call.id, error)
                results.append(_sub_agent_error(call, error or "dispatch failed"))
            else:
                dispatched.append((call, request))
        window = max(1, self.agent.max_tool_concurrency)
        running: list[tuple[ParsedSubAgentCall, RunRequest, Any]] = []
        for call, request in dispatched:
            if len(running) >= window:
                results.append(await self._finish_child(running.pop(0), out))
            with SetWorkflowID(run_workflow_id(request.session_id, 1)):
                handle = await DBOS.start_workflow_async(_agent_run_workflow(), request.model_dump(mode="json"))
            out.events.append({"type": "subagent_start", "data": {"tool_call_id": call.id, "session_id": request.session_id, "agent": request.agent_name}})
            running.append((call, request, handle))
        for item in running:
            results.append(await self._finish_child(item, out))
        return results

    def _child_request(self, call: ParsedSubAgentCall) -> tuple[RunRequest | None, str | None]:
        tool = self.agent.get_tool(f"{SUB_AGENT_TOOL_PREFIX}{call.agent_type}")
        if tool is None or not isinstance(tool.sub_agent, SubAgentSpec):
            return None, f"Unknown sub-agent: {call.agent_type!r} is not a sub-agent of this agent"
        if call.parse_error is not None:
            return None, f"Invalid arguments for sub-agent {call.agent_type}: {call.parse_error}"
        try:
            child_input = tool.sub_agent.child_input(tool.parse_input(call.input))
        except Exception as exc:
            return None, str(exc)
        request = RunRequest(
            session_id=child_session_id(self.req.session_id, call.id),
            run=1,
            agent_name=tool.sub_agent.agent.name,
            input=child_input,
            parent_session_id=self.req.session_id,
            parent_tool_call_id=call.id,
            root_session_id=self.req.root_session_id or self.req.session_id,
        )
        return request, None

    async def _finish_child(self, item: tuple[ParsedSubAgentCall, RunRequest, Any], out: StepOutput) -> ToolResultMessage:
        call, request, handle = item
        try:
            result = AgentResult.model_validate(await handle.get_result())
        except Exception as exc:  # the child workflow failed or was cancelled
            result = AgentResult(session_id=request.session_id, status="aborted" if "cancel" in str(exc).lower() else "failed", error=str(exc))
        child_events = await asyncio.to_thread(self.ex.session_events, request.session_id)
        out.events.extend({"type": "subagent_event", "data": {"session_id": request.session_id, "event": e}} for e in child_events)
        out.events.append({"type": "subagent_finish", "data": {"tool_call_id": call.id, "session_id": request.session_id, "status": result.status}})
        if result.status == "completed":
            return create_sub_agent_result_message(call.id, call.agent_type, result=result.output, success=True)
        return _sub_agent_error(call, f"Sub-agent {call.agent_type} {result.status}: {result.error or 'no output'}")

    # --- human in the loop ----------------------------------------------------------------

    async def _gate(self, step_no: int, calls: list[ParsedToolCall], base: Any) -> dict[str, str]:
        """Which calls wait, and for what: ``client`` tools, and calls that need approval.

        Static gates are decided here; ``require_approval`` callables are user code, so
        they are evaluated in a DBOS step and their verdicts replay from its checkpoint.
        """
        gates: dict[str, str] = {}
        dynamic: list[ParsedToolCall] = []
        for call in calls:
            tool = self.agent.get_tool(call.name)
            assert tool is not None
            if tool.is_client:
                gates[call.id] = "client"
            elif callable(tool.require_approval):
                dynamic.append(call)
            elif tool.require_approval:
                gates[call.id] = "approval"
        if dynamic:
            needing = await DBOS.run_step_async(
                {"name": "approval_gate"}, self.ex.evaluate_approval, self._tool_jobs(step_no, dynamic, base)
            )
            gates.update({call_id: "approval" for call_id in needing})
        return gates

    async def _suspend(self, step_no: int, calls: list[ParsedToolCall], gates: dict[str, str]) -> None:
        """Record the waiting calls (one transaction) and tell the hooks."""
        rows = [self._pending_row(step_no, call, gates[call.id]) for call in calls]
        status = "awaiting_approval" if "approval" in gates.values() else "awaiting_client_tool"
        await asyncio.to_thread(self.ex.suspend, self.req.session_id, self.req.run, step_no, status, rows)
        await fire_hook(
            self.agent.hooks, "on_agent_suspended", _suspension_reason(gates), [c.id for c in calls], self._hook_ctx(step_no)
        )

    def _pending_row(self, step_no: int, call: ParsedToolCall, kind: str) -> dict[str, Any]:
        tool = self.agent.get_tool(call.name)
        assert tool is not None
        timeout = tool.client_timeout if kind == "client" else tool.approval_timeout
        return {
            "session_id": self.req.session_id,
            "tool_call_id": call.id,
            "root_session_id": self.req.root_session_id or self.req.session_id,
            "workflow_id": run_workflow_id(self.req.session_id, self.req.run),
            "run": self.req.run,
            "step": step_no,
            "tool_name": call.name,
            "kind": kind,
            "input": call.arguments,
            "output_schema": tool.output_schema.model_json_schema() if tool.output_schema else None,
            "timeout": timeout,
        }

    async def _wait_for_answer(self, call: ParsedToolCall, kind: str) -> dict[str, Any] | None:
        """``DBOS.recv`` on the call's topic, with the tool's deadline (durable across restarts)."""
        tool = self.agent.get_tool(call.name)
        assert tool is not None
        timeout = tool.client_timeout if kind == "client" else tool.approval_timeout
        answer: dict[str, Any] | None = await DBOS.recv_async(
            answer_topic(call.id), timeout_seconds=timeout if timeout is not None else WAIT_FOREVER_SECONDS
        )
        return answer

    async def _settle_gated(
        self,
        step_no: int,
        calls: list[ParsedToolCall],
        gates: dict[str, str],
        answers: list[dict[str, Any] | None],
        base: Any,
    ) -> list[ToolOutcome]:
        """Run the approved calls (in parallel, from the pre-step state); turn the rest into results."""
        approved = [c for c, a in zip(calls, answers) if gates[c.id] == "approval" and outcome_error("approval", c.id, a) is None]
        outcomes = list(await self._start_parallel(step_no, approved, base))
        for call, answer in zip(calls, answers):
            if call in approved:
                continue
            error = outcome_error(gates[call.id], call.id, answer)
            result = None if error is not None or answer is None else answer.get("result")
            outcomes.append(
                ToolOutcome(
                    tool_call_id=call.id, tool_name=call.name, success=error is None, result=result, error=error,
                    executed=False,
                )
            )
        return outcomes

    def _classify(
        self, calls: list[ParsedToolCall]
    ) -> tuple[list[ParsedToolCall], list[ParsedToolCall], list[ParsedToolCall], list[ParsedSubAgentCall]]:
        regular, finishers, unknown, children = [], [], [], []
        for call in calls:
            tool = self.agent.get_tool(call.name)
            if tool is None and call.name.startswith(SUB_AGENT_TOOL_PREFIX) or tool is not None and tool.is_sub_agent:
                agent_type = call.name.removeprefix(SUB_AGENT_TOOL_PREFIX)
                children.append(
                    ParsedSubAgentCall(id=call.id, agent_type=agent_type, input=call.arguments, parse_error=call.parse_error)
                )
            elif tool is None or tool.name == FINISH_TOOL_NAME:
                unknown.append(call)
            elif tool.finish_with:
                finishers.append(call)
            else:
                regular.append(call)
        return regular, finishers, unknown, children

    def _start_parallel(self, step_no: int, calls: list[ParsedToolCall], base_state: Any) -> Awaitable[list[ToolOutcome]]:
        """Start calls concurrently under the agent's cap; their step ids are reserved now, in call order."""
        reservations = [DBOS.reserve_step() for _ in calls]
        limit = asyncio.Semaphore(max(1, self.agent.max_tool_concurrency))

        async def run_one(reservation: Any, job: ToolJob) -> ToolOutcome:
            async with limit:
                return await reservation.run_async({"name": f"tool:{job.call.name}"}, self.ex.run_tool, job)

        jobs = self._tool_jobs(step_no, calls, base_state)
        return asyncio.gather(*(run_one(r, job) for r, job in zip(reservations, jobs)))

    async def _run_tool_step(self, step_no: int, call: ParsedToolCall, base_state: dict[str, Any]) -> ToolOutcome:
        return await DBOS.run_step_async(
            {"name": f"tool:{call.name}"}, self.ex.run_tool, self._tool_job(step_no, call, base_state)
        )

    def _tool_job(self, step_no: int, call: ParsedToolCall, base_state: Any) -> ToolJob:
        return ToolJob(self.agent.name, self.req.session_id, step_no, call, base_state)

    def _tool_jobs(self, step_no: int, calls: list[ParsedToolCall], base_state: Any) -> list[ToolJob]:
        return [self._tool_job(step_no, call, base_state) for call in calls]

    # --- deciding how the step ends -----------------------------------------------------

    async def _decide(self, step_result: StepResult, plan: StepProcessingPlan, out: StepOutput) -> Terminal | None:
        if plan.is_terminal and plan.status_update is not None:
            update = plan.status_update
            return Terminal(update.status, update.output, update.error, plan.stop_reason)
        finished = self._finish_with_terminal(out.outcomes)
        if finished is not None:
            return finished
        tripped = self.guard.record_step(out.results)
        if tripped is not None:
            error = f"tool {tripped!r} failed on {self.guard.max_same_tool_errors} consecutive steps"
            return Terminal("failed", error=error, stop_reason="error")
        if not should_continue(step_result):
            ended = self._text_terminal(step_result, out)
            if ended is not None:
                return ended
        if await self.agent.should_stop(StopInfo(steps=self.steps, step_count=self.step_count + 1, usage=self.usage)):
            return self._stopped_by_condition()
        return None

    def _finish_with_terminal(self, outcomes: list[ToolOutcome]) -> Terminal | None:
        """The first successful finishWith call completes the agent (seed 003)."""
        described = []
        for outcome in outcomes:
            tool = self.agent.get_tool(outcome.tool_name)
            assert tool is not None
            described.append(tool.outcome(outcome.tool_call_id, output=outcome.result, error=outcome.error))
        resolution = resolve_finish_with(described, self.agent.output_schema)
        if resolution.status == "completed":
            return Terminal("completed", output=resolution.output, stop_reason="tool_use")
        if resolution.status == "failed":
            return Terminal("failed", error=resolution.error, stop_reason="error")
        return None

    def _text_terminal(self, step_result: StepResult, out: StepOutput) -> Terminal | None:
        """A step without tool calls ends the turn, unless a structured-output agent can recover."""
        stop_reason = getattr(step_result, "stop_reason", None)
        if self.agent.output_schema is not None:
            if is_recoverable_error_stop_reason(stop_reason):
                out.extra_messages.append(max_tokens_recovery_message(self.agent.finish_tool_name or FINISH_TOOL_NAME))
                return None
            if determine_final_status(step_result) == "completed":
                return None  # keep going: the model must call the completion tool
        status = determine_final_status(step_result)
        if status == "failed":
            error = getattr(step_result, "error", None) or f"model stopped with reason {stop_reason}"
            return Terminal("failed", error=error, stop_reason=stop_reason or "error")
        output = step_result.content if isinstance(step_result, TextStepResult) else None
        return Terminal("completed", output=output, stop_reason=stop_reason or "end_turn")

    def _stopped_by_condition(self) -> Terminal:
        if self.agent.output_schema is not None:
            return Terminal("failed", error="stopped before producing output (max_steps or stop_when)", stop_reason="max_steps")
        last = self.steps[-1]
        output = getattr(last, "content", None)
        return Terminal("completed", output=output, stop_reason="max_steps")

    # --- commit and after -----------------------------------------------------------

    async def _commit(self, step_no: int, out: StepOutput) -> bool:
        new_state = apply_step_writes(self.state, out.writes) if out.writes else self.state
        payload = {
            "session_id": self.req.session_id,
            "run": self.req.run,
            "step": step_no,
            "messages": [m.model_dump(mode="json", exclude_none=True) for m in out.messages + out.extra_messages],
            "patch": step_writes_to_rfc6902(out.writes) if out.writes else None,
            "snapshot": new_state if step_no % SNAPSHOT_EVERY_STEPS == 0 else None,
            "usage": out.usage_rows,
            "events": out.events,
            "terminal": out.terminal.as_payload() if out.terminal else None,
            "resolved": out.resolved,
        }
        committed = await asyncio.to_thread(self.ex.commit_step, payload)
        self.messages = self.messages + out.messages + out.extra_messages
        self.state = new_state
        self.step_count = step_no
        return bool(committed["interrupted"])

    async def _after_commit(self, step_no: int, out: StepOutput) -> None:
        """Hooks that observe a committed step (they run again if a recovered run replays it)."""
        hooks = self.agent.hooks
        ctx = self._hook_ctx(step_no)
        calls = {c.id: c for c in _tool_calls(out.messages)}
        for message in out.messages:
            await fire_hook(hooks, "on_message", message, ctx)
        for result in out.results:
            if result.tool_call_id in calls and result.tool_name != FINISH_TOOL_NAME:
                await fire_hook(hooks, "after_tool", calls[result.tool_call_id], result, ctx)
        await fire_hook(hooks, "on_step_finish", self.steps[-1], self.last_usage, ctx)
        if out.terminal is not None and out.terminal.status == "completed":
            await fire_hook(hooks, "on_agent_complete", self._result(out.terminal), ctx)

    def _hook_ctx(self, step_no: int) -> HookContext:
        return HookContext(self.req.session_id, self.agent.name, step_no, StateTracker(self.state))

    def _result(self, terminal: Terminal) -> AgentResult:
        return AgentResult(
            session_id=self.req.session_id,
            status=terminal.status,  # type: ignore[arg-type]
            output=terminal.output,
            error=terminal.error,
            step_count=self.step_count,
            stop_reason=terminal.stop_reason,
        )


@dataclass
class ToolJob:
    """What a tool step needs: the call and the state it starts from."""

    agent_name: str
    session_id: str
    step: int
    call: ParsedToolCall
    base_state: dict[str, Any]


# --- pure helpers that shape messages, events and usage rows ------------------------------


def _agent_run_workflow() -> Any:
    from helix_dbos.runtime.workflow import agent_run_workflow  # the workflow module imports this one

    return agent_run_workflow


def _sub_agent_error(call: ParsedSubAgentCall, error: str) -> ToolResultMessage:
    return create_sub_agent_result_message(call.id, call.agent_type, success=False, error=error)


def _suspension_reason(gates: dict[str, str]) -> str:
    return "awaiting_approval" if "approval" in gates.values() else "awaiting_client_tool"


def _result_message(outcome: ToolOutcome) -> ToolResultMessage:
    return create_tool_result_message(
        outcome.tool_call_id, outcome.tool_name, result=outcome.result, success=outcome.success, error=outcome.error
    )


def _unknown_tool_message(call: ParsedToolCall) -> ToolResultMessage:
    return create_tool_result_message(
        call.id, call.name, success=False, error=f"Unknown tool: {call.name!r} is not a tool of this agent"
    )


def _in_call_order(results: list[ToolResultMessage], plan: StepProcessingPlan) -> list[ToolResultMessage]:
    message_plan = plan.assistant_message_plan
    if message_plan is None:
        return results
    order = {c.id: i for i, c in enumerate(message_plan.tool_calls)}
    order.update({c.id: len(order) + i for i, c in enumerate(message_plan.sub_agent_calls)})
    return sorted(results, key=lambda m: order.get(m.tool_call_id, len(order)))


def _tool_calls(messages: list[Message]) -> list[ParsedToolCall]:
    return [call for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls]


def _assistant_events(message: AssistantMessage) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    if message.content:
        events.append({"type": "text", "data": {"content": message.content}})
    for call in message.tool_calls:
        if call.name != FINISH_TOOL_NAME:
            events.append({"type": "tool_call", "data": {"tool_call_id": call.id, "tool_name": call.name, "input": call.arguments}})
    return events


def _tool_result_events(results: list[ToolResultMessage]) -> list[dict[str, Any]]:
    return [
        {
            "type": "tool_result",
            "data": {"tool_call_id": r.tool_call_id, "tool_name": r.tool_name, "content": r.content, "is_error": r.is_error},
        }
        for r in results
        if r.tool_name != FINISH_TOOL_NAME
    ]


def _terminal_events(terminal: Terminal | None) -> list[dict[str, Any]]:
    if terminal is None:
        return []
    if terminal.status == "completed":
        return [{"type": "finish", "data": {"output": terminal.output, "stop_reason": terminal.stop_reason}}]
    return [{"type": "error", "data": {"error": terminal.error, "stop_reason": terminal.stop_reason}}]


def _step_finish_data(step_no: int, step_result: StepResult, usage: Usage) -> dict[str, Any]:
    return {
        "step": step_no,
        "stop_reason": getattr(step_result, "stop_reason", None),
        "usage": usage.model_dump(mode="json"),
    }


def _llm_usage_row(model: str, usage: Usage, step_result: StepResult) -> dict[str, Any]:
    return {
        "source": "llm",
        "name": model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cost_usd": usage.cost_usd,
        "ms": usage.latency_ms,
        "success": step_result.type != "error",
    }


def _tool_usage_row(outcome: ToolOutcome) -> dict[str, Any]:
    return {"source": "tool", "name": outcome.tool_name, "ms": outcome.ms, "success": outcome.success}
