"""Where a run's work is observed: a run, an agent step, a model call, a tool call, a
sub-agent or companion call, a wait for people, a step commit. Each is a context manager
the durable code wraps around that point; each opens the span (``tracing.py``) and
records the metrics (``metrics.py``) of the work done there.

**Replays.** DBOS replays a checkpointed step without running its body, so a model or
tool call's span and metrics come from the body and exist once, from the process that
made the call. A step's span, and the spans of its sub-agent calls, belong to workflow
code, which a recovered run runs again up to where it crashed: they are exported only
for a step whose commit this execution made; a step it replays (its commit recognized
as made already) leaves no span (its span is never ended, so never exported). A
recovered run's span starts at the recovery, with ``helix.recovered``. The spans of the
execution that crashed were never ended; what it did end before the crash points at
them, which the recovered execution's spans replace under the same ids with
:class:`~helix_dbos.observability.span_ids.StableSpanIds` (else at parents the backend
never receives).

**Waits.** A run that parks for people ends its span with a ``helix.suspended`` event;
the waiter's ``helix.wait`` span lasts until the answers are in (or their deadlines
passed); the continuation's run span starts with a ``helix.resumed`` event naming what
each call got.

**Off.** When nothing observes (no ``TracerProvider``, no ``MeterProvider``, no
Prometheus reporting: :mod:`~helix_dbos.observability.switch`), a step, a model call, a
tool call and a commit make no span and record nothing: each point hands back
:data:`~helix_dbos.observability.switch.OFF`. A run still makes current the context its
span would have had (its parent's), so the runs it starts carry the same
``traceparent`` as with tracing on.

**Content.** Messages, tool arguments and results are recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the OpenTelemetry GenAI
convention's opt-in): they may hold what users typed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from helix_dbos.observability import metrics
from helix_dbos.observability.switch import OFF, SWITCH, Off, refresh
from helix_dbos.observability.tracing import (
    TRACER,
    current,
    launching,
    run_parent,
    session_span_context,
    start_span,
    unrecorded_span,
)
from helix_dbos.observability.tracing import trace_parent as trace_parent  # companions' requests carry it

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def capture_content() -> bool:
    """Whether spans may carry messages, tool arguments and results (opt-in)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").lower() in ("1", "true", "yes")


def _json(value: Any) -> str:
    return json.dumps(value, default=lambda v: v.model_dump(mode="json") if hasattr(v, "model_dump") else str(v))


@dataclass
class RunObservation:
    """The run's span, and what the run's end is counted as."""

    span: Span
    agent: str
    workflow_id: str
    ended_here: bool = False
    """A terminal step was committed (or the run failed) by this execution: its end counts."""

    def failed(self, exc: BaseException) -> None:
        """The run raised (the workflow ends it ``failed``)."""
        self.span.record_exception(exc)
        self.ended_here = True

    def finish(self, result: Any) -> None:
        """The workflow's result: an ``AgentResult``, or the ``ParkedStep`` it waits at."""
        span = self.span
        gates = getattr(result, "gates", None)
        if gates is not None:
            span.add_event("helix.suspended", {"helix.step": result.step, "helix.tool_call_ids": list(gates)})
            span.set_attribute("helix.run.outcome", "suspended")
            return
        span.set_attribute("helix.run.outcome", result.status)
        if result.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
        if result.status == "failed":
            span.set_status(Status(StatusCode.ERROR, result.error))
        if self.ended_here:
            metrics.run_ended(self.agent, result.status)


_run: ContextVar[RunObservation | None] = ContextVar("helix_run_observation", default=None)


def run(request: Any, first_execution: bool) -> AbstractContextManager[RunObservation | Off]:
    """One execution of a run's workflow (``execute``/``resume``, or a continuation after a
    wait). Whether this process observes is looked at again here (``switch.refresh``)."""
    if not refresh().observing:
        return _unobserved_run(request)
    return _observed_run(request, first_execution)


@contextmanager
def _unobserved_run(request: Any) -> Iterator[Off]:
    """A run nothing observes: the context its span would have (the no-op tracer's span
    is its parent's) is current while it runs, so children and DBOS see the same parent."""
    parent, _ = run_parent(request.root_session_id or request.session_id, request.trace_parent)
    with current(unrecorded_span(parent)):
        yield OFF


@contextmanager
def _observed_run(request: Any, first_execution: bool) -> Iterator[RunObservation]:
    parked = request.parked
    if first_execution and parked is None:
        metrics.run_started(request.agent_name)
    root = request.root_session_id or request.session_id
    parent, links = run_parent(root, request.trace_parent)
    span = start_span(f"invoke_agent {request.agent_name}", ("run", request.workflow_id), context=parent, links=links)
    if span.is_recording():
        span.set_attributes({
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": request.agent_name,
            "gen_ai.conversation.id": request.session_id,
            "helix.session_id": request.session_id,
            "helix.root_session_id": root,
            "helix.session.trace_id": format(session_span_context(root).trace_id, "032x"),
            "helix.run": request.run,
            "helix.workflow_id": request.workflow_id,
            "helix.recovered": not first_execution,
            "helix.continued": parked is not None,
        })
        if request.parent_session_id is not None:
            span.set_attribute("helix.parent_session_id", request.parent_session_id)
            span.set_attribute("helix.parent_tool_call_id", request.parent_tool_call_id or "")
        if parked is not None:
            span.add_event("helix.resumed", {"helix.step": parked.step, **_answers(parked.gates, parked.answers)})
    observation = RunObservation(span, request.agent_name, request.workflow_id)
    token = _run.set(observation)
    try:
        with current(span):
            yield observation
    except BaseException as exc:  # DBOS's cancellation too: the run was aborted
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        _run.reset(token)
        span.end()


def _answers(gates: dict[str, str], answers: dict[str, Any]) -> dict[str, list[str]]:
    """The gated calls of a parked step by what they got: approved, denied, answered, timed out."""
    got: dict[str, list[str]] = {}
    for call_id, kind in gates.items():
        answer = answers.get(call_id)
        if answer is None:
            what = "timed_out"
        elif kind == "approval":
            what = "approved" if answer.get("approved") else "denied"
        else:
            what = "answered"
        got.setdefault(f"helix.calls.{what}", []).append(call_id)
    return got


@dataclass
class StepObservation:
    """An agent step's span and what its commit said."""

    span: Span
    agent: str
    started: float = field(default_factory=time.perf_counter)
    replayed: bool = False
    committed: bool = False
    deferred: list[tuple[Span, int]] = field(default_factory=list)
    """Spans of the step's calls that ended, with their end times: ended with the step, dropped with it."""

    def defer(self, span: Span) -> None:
        self.deferred.append((span, time.time_ns()))


_step: ContextVar[StepObservation | None] = ContextVar("helix_step_observation", default=None)


def _durable_key(kind: str, what: str) -> tuple[str, ...] | None:
    """The stable span id key of a ``kind`` of span (a step, a call) in the current run's workflow."""
    run_observation = _run.get()
    return None if run_observation is None else (kind, run_observation.workflow_id, what)


def step(agent: str, step_no: int) -> AbstractContextManager[StepObservation | Off]:
    """One agent step of this execution: model call, tools, children, commit (or a park)."""
    return _step_observed(agent, step_no) if SWITCH.observing else OFF


@contextmanager
def _step_observed(agent: str, step_no: int) -> Iterator[StepObservation]:
    span = start_span(f"agent_step {step_no}", _durable_key("step", str(step_no)), attributes={"helix.step": step_no})
    observation = StepObservation(span, agent)
    token = _step.set(observation)
    try:
        with current(span):
            yield observation
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        _step.reset(token)
        if not observation.replayed:
            for deferred, ended_at in observation.deferred:
                deferred.end(end_time=ended_at)
            span.end()
        if observation.committed:
            metrics.step_committed(agent, time.perf_counter() - observation.started)


def suspended(step_no: int, gates: dict[str, str]) -> None:
    """The current step parks: its calls in ``gates`` wait for people."""
    observation = _step.get()
    if observation is not None:
        observation.span.add_event("helix.suspended", {"helix.tool_call_ids": list(gates)})


@dataclass
class CommitObservation:
    span: Span
    terminal: Any
    replayed: bool = False

    def outcome(self, outcome: Any) -> None:
        """What the commit answered (a ``CommitOutcome``)."""
        self.replayed = outcome.replayed
        step_observation = _step.get()
        if outcome.replayed or outcome.refused is not None:
            if step_observation is not None and outcome.replayed:
                step_observation.replayed = True
            return
        if step_observation is not None:
            step_observation.committed = True
        run_observation = _run.get()
        if self.terminal is not None and run_observation is not None:
            run_observation.ended_here = True


def commit(step_no: int, terminal: Any) -> AbstractContextManager[CommitObservation | Off]:
    """The step's commit transaction. Its span is dropped when the commit was made already."""
    return _commit_observed(step_no, terminal) if SWITCH.observing else OFF


@contextmanager
def _commit_observed(step_no: int, terminal: Any) -> Iterator[CommitObservation]:
    span = TRACER.start_span("helix.commit", attributes={"helix.step": step_no})
    if terminal is not None and span.is_recording():
        span.set_attribute("helix.run.status", terminal.status)
    observation = CommitObservation(span, terminal)
    try:
        with current(span):
            yield observation
    finally:
        if not observation.replayed:
            span.end()


def model_call(
    model: str, session_id: str, messages: Any = None
) -> AbstractContextManager[Callable[[Any, Any], None]]:
    """A model call that is made now (not replayed). Yields a function to call with the
    ``(StepResult, Usage)`` the model answered."""
    return _model_call_observed(model, session_id, messages) if SWITCH.observing else OFF


@contextmanager
def _model_call_observed(model: str, session_id: str, messages: Any) -> Iterator[Callable[[Any, Any], None]]:
    span = TRACER.start_span(f"chat {model}", kind=SpanKind.CLIENT)
    if span.is_recording():
        span.set_attributes({
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": model.split("/", 1)[0] if "/" in model else "unknown",
            "gen_ai.conversation.id": session_id,
        })
        if messages is not None and capture_content():
            span.set_attribute("gen_ai.input.messages", _json(messages))
    started = time.perf_counter()
    answered: list[Any] = []

    def answer(result: Any, usage: Any) -> None:
        answered.append((result, usage))
        if not span.is_recording():
            return
        span.set_attributes({
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.response.finish_reasons": [str(getattr(result, "stop_reason", None) or result.type)],
        })
        if usage.cost_usd is not None:
            span.set_attribute("helix.cost_usd", usage.cost_usd)
        if result.type == "error":
            span.set_status(Status(StatusCode.ERROR, getattr(result, "error", None)))
            span.set_attribute("error.type", "model_error")
        if capture_content():
            span.set_attribute("gen_ai.output.messages", _json(result))

    try:
        with current(span):
            yield answer
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        span.set_attribute("error.type", type(exc).__name__)
        raise
    finally:
        span.end()
        result, usage = answered[0] if answered else (None, None)
        ok = result is not None and result.type != "error"
        metrics.model_called(model, time.perf_counter() - started, usage, ok)


def tool_call(name: str, call_id: str, arguments: Any = None) -> AbstractContextManager[Callable[[Any], None]]:
    """A tool call whose body runs now. Yields a function to call with its ``ToolOutcome``."""
    return _tool_call_observed(name, call_id, arguments) if SWITCH.observing else OFF


@contextmanager
def _tool_call_observed(name: str, call_id: str, arguments: Any) -> Iterator[Callable[[Any], None]]:
    span = TRACER.start_span(f"execute_tool {name}", attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
    })
    if arguments is not None and span.is_recording() and capture_content():
        span.set_attribute("gen_ai.tool.call.arguments", _json(arguments))
    started = time.perf_counter()
    ended: list[bool] = []

    def outcome(result: Any) -> None:
        ended.append(result.success)
        if not span.is_recording():
            return
        if not result.success:
            span.set_status(Status(StatusCode.ERROR, result.error))
            span.set_attribute("error.type", result.error_type or "tool_error")
        elif capture_content():
            span.set_attribute("gen_ai.tool.call.result", _json(result.result))

    try:
        with current(span):
            yield outcome
    finally:
        span.end()
        metrics.tool_called(name, time.perf_counter() - started, bool(ended and ended[0]))


UNKNOWN_TOOL = "(unknown)"
"""The ``tool`` a call of a name the agent has no tool of is counted under (not the name
the model made up, which would make a label value of anything)."""


def tool_call_refused(name: str, call_id: str, error: str) -> None:
    """A tool call that failed before its body ran (invalid arguments; an unknown tool,
    ``name`` :data:`UNKNOWN_TOOL`): a failed ``execute_tool`` span, and a call counted
    with ``outcome="error"`` that took no time."""
    span = TRACER.start_span(f"execute_tool {name}", attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
    })
    if span.is_recording():
        span.set_status(Status(StatusCode.ERROR, error))
        span.set_attribute("error.type", "tool_error")
    span.end()
    metrics.tool_called(name, 0.0, False)


@contextmanager
def mcp_call(server: str) -> Iterator[None]:
    """An MCP server's tool called from within its tool call (``tool_call``): names the
    server on the tool's span (``helix.mcp.server``) and counts the call per server, as
    an error when the block raises (the tool answered ``isError``, or the server could
    not be reached)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("helix.mcp.server", server)
    ok = False
    try:
        yield
        ok = True
    finally:
        metrics.mcp_called(server, ok)


@dataclass
class LaunchObservation:
    """A call that runs another agent (a sub-agent or a companion): its span, under which
    the child's run nests, wherever and whenever it runs."""

    span: Span

    @contextmanager
    def launching(self) -> Iterator[None]:
        """Start the child's workflow in this block (DBOS's spans of it nest under the call)."""
        with launching(self.span):
            yield

    def request(self, request: Any) -> dict[str, Any]:
        """The child's ``RunRequest`` as workflow input, carrying this call's span."""
        return dict(request.model_copy(update={"trace_parent": trace_parent(self.span)}).model_dump(mode="json"))

    def finished(self, status: str, error: str | None = None) -> None:
        """The child's run ended (or the call ended without waiting for it)."""
        self.span.set_attribute("helix.child.status", status)
        if status in ("failed", "aborted"):
            self.span.set_status(Status(StatusCode.ERROR, error))
        observation = _step.get()
        if observation is None:
            self.span.end()
        else:
            observation.defer(self.span)


def sub_agent(call_id: str, name: str, child_session_id: str | None = None) -> LaunchObservation:
    """A call of the sub-agent ``name``; end it with ``finished``."""
    span = start_span(f"invoke_agent {name}", _durable_key("call", call_id), attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, "gen_ai.tool.call.id": call_id,
    })
    if child_session_id is not None:
        span.set_attribute("helix.child_session_id", child_session_id)
    return LaunchObservation(span)


@contextmanager
def companion_call(call_id: str, tool_name: str) -> Iterator[None]:
    """A companion tool call: the companion run it starts (a request built in this block,
    :func:`~helix_dbos.observability.tracing.trace_parent`) nests under its span."""
    span = start_span(f"execute_tool {tool_name}", _durable_key("call", call_id), attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name, "gen_ai.tool.call.id": call_id,
    })
    observation = LaunchObservation(span)
    status = "failed"
    try:
        with observation.launching():
            yield
        status = "completed"
    finally:
        observation.finished(status)


@contextmanager
def wait(
    session_id: str, root_session_id: str, run_no: int, step_no: int, call_ids: list[str],
    trace_parent: str | None = None,
) -> Iterator[Any]:
    """The wait of a parked step for people's answers (the waiter workflow), beside the
    run's spans (under ``trace_parent``, the run's). Yields a function to call with the
    answers (None: the run ended meanwhile)."""
    parent, links = run_parent(root_session_id, trace_parent)
    span = TRACER.start_span("helix.wait", context=parent, links=links, attributes={
        "helix.session_id": session_id, "helix.run": run_no, "helix.step": step_no, "helix.tool_call_ids": call_ids,
    })

    def answered(answers: list[Any] | None) -> None:
        if answers is None:
            span.set_attribute("helix.wait.outcome", "run_ended")
        else:
            span.set_attribute("helix.wait.timed_out", sum(a is None for a in answers))
            span.set_attribute("helix.wait.outcome", "answered")

    try:
        with current(span):
            yield answered
    finally:
        span.end()
