"""One run of an agent as workflow code: deterministic, with every side effect a DBOS step.

Per agent step::

    llm step  ->  plan (pure)  ->  phase 1: regular tools, parallel, one step each
              ->  phase 2: finishWith tools, in order  ->  sub-agents  ->  ONE commit transaction

A step with calls that wait for people (approval, client tools) parks the run once its
other phase-1 calls ran: ``run`` returns a :class:`ParkedStep` and the workflow ends; the
run's continuation, a workflow of its own, takes the step up after the wait with the
answers (``_durable/workflow.py``).

The commit is a plain transaction, not a DBOS step: it is idempotent on its own (a step
this run committed already is recognized by its key and not written again),
so a replay calls it again harmlessly and gets the same answer.

The step's stream events are written as they happen, each keyed so that a replay writes
nothing twice (``_durable/streaming.py``); the commit writes the ones still missing.

The LLM step's body is :func:`call_llm`; its checkpoint is read back with
:func:`~helix_dbos._durable.payloads.llm_output`.

The loop keeps the transcript and the state in memory. It reads them once, at the start
of the run, from the append-only logs as of the run's first step, so a recovered run
rebuilds exactly what the crashed one had before replaying its checkpointed steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dbos import DBOS

from helix_dbos._durable import hitl
from helix_dbos._durable.children.companion_calls import run_companion_calls, take_notices
from helix_dbos._durable.children.dispatch import run_children
from helix_dbos._durable.hooks import HookState, fire_hook, observe_commits, step_info, tool_calls_of
from helix_dbos._durable.payloads import ParkedStep, RunStart, ToolOutcome, checkpoint_json, llm_output
from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import RunContext, current_runtime
from helix_dbos._durable.streaming import (
    StepDeltas,
    StepEvents,
    assistant_events,
    outcome_events,
    result_message,
    step_usage,
    terminal_events,
    tool_result_events,
)
from helix_dbos._durable.tool_execution.phases import classify, run_tool_step, start_parallel
from helix_dbos.errors import HelixError
from helix_dbos.llm import generate_with_retry
from helix_dbos.observability import points as observe
from helix_dbos.events import StatePatchEvent, StepFinishEvent, StepStartEvent
from helix_dbos.orchestration import (
    RunawayGuard,
    StepProcessingPlan,
    StopInfo,
    build_messages_for_llm,
    create_assistant_message,
    create_tool_result_message,
    determine_final_status,
    is_recoverable_error_stop_reason,
    max_tokens_recovery_message,
    plan_step_processing,
    resolve_finish_with,
    should_continue,
    synthesize_step_tool_results,
)
from helix_dbos.state import StateTracker, StepWrite, apply_step_writes, merge_step_writes, step_writes_to_rfc6902
from helix_dbos._store.memory_records import MemoryWrite
from helix_dbos._store.records import ResolvedCall, StepCommit, Terminal
from helix_dbos._text import storable
from helix_dbos.types import (
    FINISH_TOOL_NAME,
    AgentResult,
    ErrorStepResult,
    ParsedToolCall,
    Message,
    StepResult,
    TextStepResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)

SNAPSHOT_EVERY_STEPS = 100
"""A full copy of the state is stored every this many steps; patches cover the rest."""


@dataclass
class StepOutput:
    """Everything one agent step produced, before it is committed."""

    events: StepEvents
    messages: list[Message] = field(default_factory=list)
    writes: list[Any] = field(default_factory=list)
    outcomes: list[ToolOutcome] = field(default_factory=list)
    results: list[ToolResultMessage] = field(default_factory=list)
    resolved: list[ResolvedCall] = field(default_factory=list)
    terminal: Terminal | None = None
    extra_messages: list[Message] = field(default_factory=list)
    notices: list[UserMessage] = field(default_factory=list)
    """Companion notices the step took (``_durable/children/companion_calls.py``), before its model call."""


class AgentLoop:
    """Runs one run of a session to its end. Created inside the workflow."""

    def __init__(self, scope: RunScope) -> None:
        self.scope = scope
        self.agent = scope.agent
        self.messages: list[Message] = []
        self.state: dict[str, Any] = {}
        self.step_count = 0
        self.steps: list[StepResult] = []
        self.usage = Usage()
        self.last_usage = Usage()
        self.guard = RunawayGuard()
        self.first_step = 1
        self.llm_checkpoints: list[dict[str, Any]] = []
        self.queue: str | None = None

    async def run(self, start: RunStart, context: RunContext | None = None) -> AgentResult | ParkedStep:
        """Run to the end of the run, or to a step that waits for people: then the
        :class:`ParkedStep` the run's continuation takes up (``_durable/workflow.py``).
        ``context``: the transcript and state the run's first transaction read (None: read
        them now)."""
        parked = self.scope.request.parked
        self.step_count = start.step_count
        self.first_step = start.step_count + 1
        self.queue = start.queue
        if parked is not None:
            self._restore(parked)
        if context is None:
            context = await asyncio.to_thread(
                current_runtime().load_run_context, self.scope.session_id, start.message_seq, start.step_count
            )
        self.messages, self.state = context
        while True:
            step_no = self.step_count + 1
            with observe.step(self.agent.name, step_no):
                out = await self._run_step(step_no, parked)
                parked = None
                if isinstance(out, ParkedStep):
                    observe.suspended(step_no, out.gates)
                    return out
                interrupted = await self._commit(step_no, out)
            await self._after_commit(step_no, out)
            if out.terminal is not None:
                return self._result(out.terminal)
            if interrupted:
                return self._result(Terminal(status="interrupted", stop_reason="interrupted"))

    # --- one step ---------------------------------------------------------------------

    def _restore(self, parked: ParkedStep) -> None:
        """Take up the run where it parked: its steps so far, their usage, its guard."""
        self.first_step = parked.first_step
        self.guard = parked.guard.model_copy(deep=True)
        self.llm_checkpoints = list(parked.llm)
        for checkpoint in parked.llm[:-1]:
            self._count_llm(checkpoint)

    async def _run_step(self, step_no: int, parked: ParkedStep | None) -> StepOutput | ParkedStep:
        """One step; its events reach the stream as they happen (``_durable/streaming.py``):
        its ``step_start`` is there already, the model's are published once the LLM step is
        checkpointed and a tool's once its step is, the rest come with the commit (which
        writes whatever of the step is still missing). A continuation
        takes its parked step up after the model's call and the calls that did not wait."""
        out = StepOutput(events=StepEvents(self.scope.session_id, self.scope.request.run, step_no))
        if parked is None:
            out.notices = await take_notices(self.scope, step_no)
            step_result, usage = await self._call_llm(step_no, out.notices)
        else:
            out.notices = [UserMessage.model_validate(m) for m in parked.notices]
            step_result, usage = self._count_llm(parked.llm[-1])
        out.messages.extend(out.notices)
        plan = plan_step_processing(step_result, output_schema=self.agent.output_schema)
        if plan.assistant_message_plan is not None:
            message = create_assistant_message(plan.assistant_message_plan)
            out.messages.append(message)
            out.events.publish(assistant_events(message))
        parking = await self._run_tools(step_no, plan, out, parked)
        if parking is not None:
            return parking
        out.terminal = await self._decide(step_result, plan, out)
        finish = StepFinishEvent(
            step=step_no,
            stop_reason=getattr(step_result, "stop_reason", None),
            usage=step_usage(self.agent.llm_config.model, usage, step_result),
        )
        out.events.add([("step_finish", finish), *terminal_events(out.terminal, self.usage)])
        return out

    async def _call_llm(self, step_no: int, notices: list[UserMessage]) -> tuple[StepResult, Usage]:
        messages = build_messages_for_llm([*self.messages, *notices], self.agent.system_prompt_for, self.state)
        checkpoint = await DBOS.run_step_async(
            {"name": "llm"}, call_llm, self.agent.name, messages, self.scope.session_id, self.scope.request.run, step_no
        )
        self.llm_checkpoints.append(checkpoint)
        return self._count_llm(checkpoint)

    def _count_llm(self, checkpoint: dict[str, Any]) -> tuple[StepResult, Usage]:
        """Count one of the run's model calls toward its budget and usage."""
        step_result, usage = llm_output(checkpoint)
        self.steps.append(step_result)
        self.usage = self.usage + usage
        self.last_usage = usage
        return step_result, usage

    async def _run_tools(
        self, step_no: int, plan: StepProcessingPlan, out: StepOutput, parked: ParkedStep | None
    ) -> ParkedStep | None:
        """Run the step's tools and children into ``out``; or, when calls of the step wait
        for people, run the others and return where the run parks."""
        scope = self.scope
        calls = classify(scope, plan.pending_tool_calls)
        base = StateTracker(self.state).get_state()  # one shared read-only view for every tool
        phase1 = await self._phase1(step_no, calls.regular, base, out, parked)
        if isinstance(phase1, ParkedStep):
            return phase1
        order = {c.id: i for i, c in enumerate(calls.regular)}
        phase1.sort(key=lambda o: order[o.tool_call_id])
        phase1_writes = merge_step_writes([o.writes for o in phase1])
        state = apply_step_writes(self.state, phase1_writes)
        if phase1_writes:  # parallel tools' writes merge in call order: one patch
            # published now when more of the step follows; else the commit, which comes at once, writes it
            more = calls.finishers or calls.companions or calls.children or plan.pending_sub_agent_calls
            emit = out.events.publish if more else out.events.add
            emit([("patch", StatePatchEvent(patches=_rfc6902(phase1_writes)))])
        writes = list(phase1_writes)
        phase2: list[ToolOutcome] = []
        for call in calls.finishers:
            outcome = await run_tool_step(scope, step_no, call, state, out.events)
            phase2.append(outcome)
            if outcome.writes:
                patch = StatePatchEvent(patches=_rfc6902(outcome.writes))
                out.events.publish([(f"patch:{call.id}", patch)])
                state = apply_step_writes(state, outcome.writes)
                writes = merge_step_writes([writes, outcome.writes])
        out.outcomes = phase1 + phase2
        out.writes = writes
        results: list[ToolResultMessage] = [result_message(o) for o in out.outcomes]
        results += [unknown_tool_message(call) for call in calls.unknown]
        for call in calls.unknown:
            observe.tool_call_refused(observe.UNKNOWN_TOOL, call.id, f"unknown tool {call.name!r}")
        results += await run_companion_calls(scope, step_no, calls.companions, out.events)
        results += await run_children(scope, step_no, self.state, calls.children + plan.pending_sub_agent_calls, out.events)
        results += synthesize_step_tool_results(plan)
        out.results = in_call_order(results, plan)
        out.messages.extend(out.results)
        out.events.add([part for outcome in out.outcomes for part in outcome_events(outcome)])
        out.events.add(tool_result_events(out.results))  # the rest: unknown tools, children, synthesized
        return None

    async def _phase1(
        self, step_no: int, regular: list[ParsedToolCall], base: Any, out: StepOutput, parked: ParkedStep | None
    ) -> list[ToolOutcome] | ParkedStep:
        """Phase 1, the regular calls in parallel. At a step whose calls wait for people:
        suspend them, run the others, and return where the run parks; its continuation
        (``parked``) then settles them, from their answers."""
        scope = self.scope
        gates = await hitl.gate(scope, step_no, regular, base) if parked is None else parked.gates
        gated = [c for c in regular if c.id in gates]
        if parked is None:
            if gated:
                await hitl.suspend(scope, step_no, gated, gates, self.state)
            free = [c for c in regular if c.id not in gates]
            ran = await start_parallel(scope, step_no, free, base, out.events)
            return self._parking(step_no, gates, ran, out.notices) if gated else ran
        answers = [parked.answers.get(c.id) for c in gated]
        reason = hitl.suspension_status(gates).value
        await fire_hook(self.agent.hooks, "on_agent_resumed", reason, scope.hook_context(step_no, self.state))
        settled = await hitl.settle(scope, step_no, gated, gates, answers, base, out.events)
        out.resolved = [
            ResolvedCall(tool_call_id=c.id, status="answered" if a else "timed_out") for c, a in zip(gated, answers)
        ]
        return parked.ran + settled

    def _parking(
        self, step_no: int, gates: hitl.Gates, ran: list[ToolOutcome], notices: list[UserMessage]
    ) -> ParkedStep:
        return ParkedStep(
            step=step_no, llm=self.llm_checkpoints, guard=self.guard, gates=gates, ran=ran,
            first_step=self.first_step, queue=self.queue, notices=[m.model_dump(mode="json") for m in notices],
            toolsets=self.scope.listed,
        )

    # --- deciding how the step ends -----------------------------------------------------

    async def _decide(self, step_result: StepResult, plan: StepProcessingPlan, out: StepOutput) -> Terminal | None:
        """How the step ends the run, if it does, in this order: structured
        output (or ``__finish__``), an error with ``should_stop``, then (for tool steps)
        finishWith and the runaway guard, a step without tool calls, and last
        ``max_steps`` / ``stop_when`` over this run's steps. An error step with
        ``should_stop=False`` is not terminal: the model is asked again."""
        if plan.is_terminal and plan.status_update is not None:
            update = plan.status_update
            return Terminal(
                status=update.status, output=update.output, error=update.error, stop_reason=_terminal_stop_reason(plan)
            )
        finished = self._finish_with_terminal(out.outcomes)
        if finished is not None:
            return finished
        tripped = self.guard.record_step(out.results)
        if tripped is not None:
            error = f"tool {tripped!r} failed on {self.guard.max_same_tool_errors} consecutive steps"
            return Terminal(status="failed", error=error, stop_reason="error")
        if not should_continue(step_result) and not isinstance(step_result, ErrorStepResult):
            ended = self._text_terminal(step_result, out)
            if ended is not None:
                return ended
        if await self.agent.should_stop(self._stop_info()):
            return self._stopped_by_condition()
        return None

    def _stop_info(self) -> StopInfo:
        """What ``max_steps`` and ``stop_when`` see: this run's steps and usage (the
        budget is per run), not the session's."""
        return StopInfo(steps=self.steps, step_count=len(self.steps), usage=self.usage)

    def _finish_with_terminal(self, outcomes: list[ToolOutcome]) -> Terminal | None:
        """The first successful finishWith call completes the agent."""
        described = [
            self.scope.tool(o.tool_name).outcome(o.tool_call_id, output=o.result, error=o.error) for o in outcomes
        ]
        resolution = resolve_finish_with(described, self.agent.output_schema)
        if resolution.status == "completed":
            return Terminal(status="completed", output=resolution.output, stop_reason="tool_use")
        if resolution.status == "failed":
            return Terminal(status="failed", error=resolution.error, stop_reason="error")
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
        if determine_final_status(step_result) == "failed":
            return Terminal(status="failed", error=f"model stopped with reason {stop_reason}", stop_reason=stop_reason)
        output = step_result.content if isinstance(step_result, TextStepResult) else None
        return Terminal(status="completed", output=output, stop_reason=stop_reason or "end_turn")

    def _stopped_by_condition(self) -> Terminal:
        last = self.steps[-1]
        if isinstance(last, ErrorStepResult):  # a non-terminal error step used up the budget
            return Terminal(status="failed", error=last.error, stop_reason="max_steps")
        if self.agent.output_schema is not None:
            return Terminal(
                status="failed", error="stopped before producing output (max_steps or stop_when)", stop_reason="max_steps"
            )
        return Terminal(status="completed", output=getattr(last, "content", None), stop_reason="max_steps")

    # --- commit and after -----------------------------------------------------------

    async def _commit(self, step_no: int, out: StepOutput) -> bool:
        new_state = apply_step_writes(self.state, out.writes) if out.writes else self.state
        run = self.scope.request.run
        commit = StepCommit(
            session_id=self.scope.session_id,
            run=run,
            step=step_no,
            messages=out.messages + out.extra_messages,
            patch=_rfc6902(out.writes) if out.writes else None,
            snapshot=new_state if step_no % SNAPSHOT_EVERY_STEPS == 0 else None,
            events=out.events.all,
            next_step=StepStartEvent(step=step_no + 1),
            terminal=out.terminal,
            resolved=out.resolved,
            fresh=self._fresh(step_no),
        )
        with observe.commit(step_no, out.terminal) as observed:
            memory = [MemoryWrite.model_validate(w) for o in out.outcomes for w in o.memory]
            outcome = await asyncio.to_thread(current_runtime().commit_step, commit, memory)
            observed.outcome(outcome)
        if outcome.refused is not None:
            await _stop_if_cancelled()
            raise HelixError(
                f"step {step_no} of session {self.scope.session_id!r} cannot be committed: the session is"
                f" {outcome.refused} and run {self.scope.request.run} no longer holds it"
            )
        self.messages = self.messages + out.messages + out.extra_messages
        self.state = new_state
        self.step_count = step_no
        return outcome.interrupted

    def _fresh(self, step_no: int) -> bool:
        """Whether no earlier execution can have written events of step ``step_no``: this
        is the workflow's first execution, and the step is not the one a continuation takes
        up (its run's first workflow streamed the step's model call and quick calls)."""
        parked = self.scope.request.parked
        return self.scope.first_execution and (parked is None or parked.step != step_no)

    async def _after_commit(self, step_no: int, out: StepOutput) -> None:
        """Hooks that observe a committed step (they run again if a recovered run replays it).
        What they write to the state is saved once, after them (``_durable/hooks.py``)."""
        hooks = self.agent.hooks
        if not observe_commits(hooks):
            return
        written = HookState(self.state, self.agent.state_schema)
        ctx = written.context(self.scope, step_no)
        calls = {c.id: c for c in tool_calls_of(out.messages)}
        for message in out.messages:
            await fire_hook(hooks, "on_message", message, ctx)
        for result in out.results:
            if result.tool_call_id in calls and result.tool_name != FINISH_TOOL_NAME:
                await fire_hook(hooks, "after_tool", calls[result.tool_call_id], result, ctx)
        messages = out.messages + out.extra_messages
        info = step_info(step_no, step_no == self.first_step, self.steps[-1], self.last_usage, messages)
        await fire_hook(hooks, "on_step_finish", info, ctx)
        if out.terminal is not None and out.terminal.status == "completed":
            await fire_hook(hooks, "on_agent_complete", self._result(out.terminal), ctx)
        self.state = await written.save(self.scope, step_no, snapshot=step_no % SNAPSHOT_EVERY_STEPS == 0)

    def _result(self, terminal: Terminal) -> AgentResult:
        return AgentResult(
            session_id=self.scope.session_id,
            status=terminal.status,
            output=storable(terminal.output),  # as committed (StepCommit.to_json_payload)
            error=storable(terminal.error),
            step_count=self.step_count,
            stop_reason=terminal.stop_reason,
            usage=self.usage,
        )


async def call_llm(
    agent_name: str, messages: list[Message], session_id: str, run: int, step: int
) -> dict[str, Any]:
    """The LLM step; transient errors are retried inside it. Its checkpoint is JSON:
    ``{"result": StepResult, "usage": Usage}`` (read back with :func:`llm_output`), with
    text Postgres cannot store replaced (``helix_dbos._text``), so every tool sees the
    call ids and arguments the transcript records. A model that
    streams sends its token deltas to the session's consumers as they arrive
    (``_durable/streaming.py``)."""
    runtime = current_runtime()
    agent = runtime.run_agent(agent_name, session_id, run)
    deltas = StepDeltas(runtime.deltas, session_id, run, step)
    with observe.model_call(agent.llm_config.model, session_id, messages) as answered:
        result, usage = await generate_with_retry(
            runtime.llm, messages, agent.tool_specs(), agent.llm_config, agent.output_schema, on_delta=deltas
        )
        answered(result, usage)
    await deltas.flush()
    return {"result": storable(checkpoint_json(result)), "usage": checkpoint_json(usage)}


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


def _rfc6902(writes: Iterable[StepWrite]) -> list[dict[str, Any]]:
    """``writes`` as RFC 6902 operations, the plain JSON objects events and commits hold."""
    return [dict(op) for op in step_writes_to_rfc6902(writes)]


async def _stop_if_cancelled() -> None:
    """Raise DBOS's cancellation when this run's workflow was cancelled (aborted): DBOS
    checks it before any of the workflow's operations, and a sleep of no time is the
    lightest one whose checkpoint is portable JSON. Returns when the workflow was not
    cancelled."""
    await DBOS.sleep_async(0)


def _terminal_stop_reason(plan: StepProcessingPlan) -> str | None:
    """The model's stop reason, else how the step ended the run: ``tool_use`` through
    ``__finish__``, ``end_turn`` with native structured output, ``error`` for a failed call."""
    if plan.stop_reason is not None:
        return plan.stop_reason
    if plan.finish_tool_call_id is not None:
        return "tool_use"
    return "error" if plan.status_update is not None and plan.status_update.status == "failed" else "end_turn"
