"""One tool call inside its DBOS step: the step body (:func:`run_tool`), and the call's
lifetime there: a deadline, interrupt and abort.

The tool step validates the call's input, runs the tool and records its state writes. A
tool that raises, times out or gets invalid input becomes an error result the model sees
(self-healing). A tool that raises is also logged (``tool.failed``, with its traceback),
and its result names the exception's class (``KeyError: 'user_id'``, ``error_type``).

The step waits for the tool body until the first of: the body ends, the call's
``timeout`` passes, or its run is interrupted or aborted (:class:`RunWatch`). Each sets
``ctx.abort_signal``. On a timeout the call ends at once as an error result the model
sees (``Tool 'x' timed out after 2s``); on an interrupt or abort the body gets
:data:`STOP_GRACE_SECONDS` to return, then the call ends as an error result.

Python cannot stop a thread: a synchronous body runs on a daemon thread of its own, which
the step stops waiting for; it runs on until it returns or the process exits, and does
not keep the process alive. An async body is a task on the workflow's loop and is
cancelled (``CancelledError`` at its next ``await``).

A body that ends after its step stopped waiting for it has its outcome recorded at once
(``helix.tool_outcomes``): the step's checkpoint does not hold it. (An outcome the step
returns is held until DBOS saves the step's checkpoint and recorded only if DBOS refuses
to: ``held_outcomes.py``.) A step that finds its call's outcome recorded returns it
without running the tool: a tool that finished is never run again by a resume of its
run. A body still running in this process when its step runs again (an abort, then
``helix-dbos resume``) is joined, not started twice. A call the run already lost
``max_worker_losses`` workers to is not started again: the run fails
(``attempts.py``)::

    checkpoint = await DBOS.run_step_async({"name": "tool:search"}, run_tool, job)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from helix_dbos._durable.hooks import fire_hook
from helix_dbos._durable.payloads import CallKey, ToolJob, ToolOutcome, tool_checkpoint
from helix_dbos._durable.runtime import current_runtime
from helix_dbos._durable.streaming import LiveState
from helix_dbos._durable.tool_execution.attempts import begin_attempt
from helix_dbos._durable.tool_execution.watch import RunWatch
from helix_dbos.events import CustomEvent
from helix_dbos.memory.context import ToolMemory
from helix_dbos._logs import EventLog
from helix_dbos.observability import points as observe
from helix_dbos.state import StateTracker
from helix_dbos._store.records import RecordedOutcome
from helix_dbos.tools import AbortReason, Tool, ToolContext
from helix_dbos.types import ParsedToolCall

logger = logging.getLogger("helix_dbos")

STOP_GRACE_SECONDS = 1.0
"""How long a tool may still take to return once its run is interrupted or aborted."""

Recorder = Callable[[ToolOutcome], None]
"""Records the outcome of a body that ended after its step stopped waiting (from any thread)."""

_threads: dict[CallKey, concurrent.futures.Future[ToolOutcome]] = {}
"""Synchronous bodies running in this process, by call; a body removes itself when it ends."""
_threads_lock = threading.Lock()


async def run_tool(job: ToolJob) -> dict[str, Any]:
    """The tool step: validate the input, run the tool within its lifetime, record its
    state writes. An outcome recorded for the call (the step ran before, and its
    checkpoint was not saved) is returned without running the tool again. The outcome
    returned is held in memory until its checkpoint is saved (``HeldOutcomes``). Its
    checkpoint is a :class:`ToolOutcome` as JSON (:func:`tool_checkpoint`), with text
    Postgres cannot store (in the result, the error, state writes and events) replaced
    (``helix_dbos._text``).
    """
    runtime = current_runtime()
    agent = runtime.run_agent(job.agent_name, job.session_id, job.run)
    tool = agent.get_tool(job.call.name)
    assert tool is not None, "the loop only schedules known tools"
    key = job.key
    if job.ran_before:
        earlier = await asyncio.to_thread(runtime.recorded_tool_outcome, *key)
        if earlier is not None:
            return earlier
    events: list[dict[str, Any]] = []

    def emit(name: str, data: Any) -> None:
        events.append(CustomEvent(name=name, data=data, tool_call_id=job.call.id).to_row())

    tracker = StateTracker(job.base_state, array_delta_mode=True, schema=agent.state_schema)
    live = LiveState(tracker, runtime.deltas, job.session_id, job.run, job.step, job.call.id, tool.name)
    memory = ToolMemory(runtime.pool, runtime.embedder, job.session_id, job.call.id)
    ctx = ToolContext(job.session_id, job.call.id, agent.name, job.step, live, emit=emit, memory=memory)
    call = ToolCall(tool, job.call, ctx, tracker, key, events, run=job.run, log=runtime.log)
    try:
        if job.call.parse_error is not None:
            raise ValueError(f"Invalid arguments for tool '{tool.name}': {job.call.parse_error}")
        tool_input = tool.parse_input(job.call.arguments)
    except Exception as exc:
        refused = call.failed(exc)
        observe.tool_call_refused(tool.name, job.call.id, refused.error or "")
        return tool_checkpoint(refused)
    if job.attempt_record is not None:  # recorded with the step's other calls (``record_attempts``)
        await job.attempt_record
    else:
        await asyncio.to_thread(begin_attempt, runtime, job, agent, tool.name)  # or ToolCallLostError: the run fails
    await fire_hook(agent.hooks, "before_tool", job.call, ctx)

    def recorded(outcome: ToolOutcome) -> RecordedOutcome:
        return RecordedOutcome(
            session_id=job.session_id, step=job.step, tool_call_id=job.call.id, run=job.run,
            tool_name=tool.name, call_digest=key[3], outcome=tool_checkpoint(outcome),
        )

    def record(outcome: ToolOutcome) -> None:
        runtime.record_tool_outcome(recorded(outcome))

    with observe.tool_call(tool.name, job.call.id, job.call.arguments) as ended:
        outcome = await run_call(call, tool_input, agent.timeout_of(tool), runtime.run_watch, job.run, record)
        ended(outcome)
    live.done()
    if outcome.writes:
        await fire_hook(agent.hooks, "on_state_change", tracker.get_state(), ctx)
    checkpoint = recorded(outcome)
    if not call.abandoned:  # the body's own outcome: held until DBOS saves this checkpoint
        runtime.outcomes.hold(checkpoint)
    return checkpoint.outcome


@dataclass
class ToolCall:
    """One call of ``tool`` in a tool step: its context and how its outcome is built."""

    tool: Tool
    call: ParsedToolCall
    ctx: ToolContext
    tracker: StateTracker
    key: CallKey
    events: list[dict[str, Any]]
    """The custom events the body emitted (``ctx.emit`` appends to this list)."""
    run: int = 0
    log: EventLog = field(default_factory=EventLog)
    """Where a body that raised is logged (``tool.failed``)."""
    started: float = field(default_factory=time.perf_counter)
    _settling: threading.Lock = field(default_factory=threading.Lock)
    _ended: bool = False
    _abandoned: bool = False

    def ended(self) -> bool:
        """The body ended; True when the step no longer waits for it (then its outcome must
        be recorded: no checkpoint will hold it)."""
        with self._settling:
            self._ended = True
            return self._abandoned

    @property
    def abandoned(self) -> bool:
        """Whether the step stopped waiting for the body (its outcome says the call did not return)."""
        with self._settling:
            return self._abandoned

    def abandon(self) -> bool:
        """The step stops waiting for the body; True when the body has just ended (its
        outcome is about to be set, and the step takes it instead)."""
        with self._settling:
            self._abandoned = not self._ended
            return self._ended

    def returned(self, value: Any) -> ToolOutcome:
        """The outcome of a body that returned ``value`` (an ``output_schema`` mismatch is an error)."""
        try:
            result = self.tool.dump_output(value)
        except Exception as exc:
            return self.failed(exc)
        memory = [w.model_dump(mode="json") for w in self.ctx.memory_writes]
        return self._outcome(success=True, result=result, writes=list(self.tracker.get_step_writes()), memory=memory)

    def failed(self, exc: BaseException) -> ToolOutcome:
        """The outcome of a call whose input or output does not fit its tool's schema: an
        error the model sees."""
        return self._outcome(success=False, error=str(exc) or type(exc).__name__)

    def raised(self, exc: BaseException) -> ToolOutcome:
        """The outcome of a body that raised ``exc``: an error the model sees, with the
        exception's class (``KeyError: 'user_id'``), and an error event on the log with
        the traceback (call it where ``exc`` is being handled)."""
        kind = type(exc).__name__
        outcome = self._outcome(success=False, error=f"{kind}: {exc}" if str(exc) else kind, error_type=kind)
        self.log.error(
            "tool.failed", exc_info=True, session_id=self.ctx.session_id, run=self.run, step=self.key[1],
            tool_call_id=self.call.id, tool=self.tool.name, error_type=kind, error=outcome.error,
        )
        return outcome

    def stopped(self, reason: AbortReason, timeout: float | None) -> ToolOutcome:
        """The outcome of a call the step stopped waiting for."""
        if reason == "timeout":
            error = f"Tool '{self.tool.name}' timed out after {timeout:g}s"
        else:
            how = "interrupted" if reason == "interrupt" else "aborted"
            error = f"Tool '{self.tool.name}' did not return: its run was {how}"
        return self._outcome(success=False, error=error)

    def _outcome(self, **fields: Any) -> ToolOutcome:
        ms = round((time.perf_counter() - self.started) * 1000, 3)  # microseconds, no more
        return ToolOutcome(
            tool_call_id=self.call.id, tool_name=self.tool.name, ms=ms, events=list(self.events), **fields
        )


async def run_call(call: ToolCall, tool_input: Any, timeout: float | None, watch: RunWatch, run: int,
                   record: Recorder) -> ToolOutcome:
    """Run the call's body (or join the same call still running here) and wait for it
    within its lifetime; the outcome the step checkpoints."""
    signal = call.ctx.abort_signal
    ending = _running(call.key) or _start(call, tool_input, record)
    ended = asyncio.wrap_future(ending) if isinstance(ending, concurrent.futures.Future) else ending
    loop = asyncio.get_running_loop()
    told = asyncio.Event()
    signal.add_listener(lambda _: loop.call_soon_threadsafe(told.set))
    deadline = None if timeout is None else loop.time() + timeout
    with watch.watching(call.ctx.session_id, run, signal):
        await _first(ended, told, _left(loop, deadline))
        if not ended.done() and not signal.is_set():
            signal.set("timeout")
        if not ended.done() and signal.reason != "timeout":
            grace = STOP_GRACE_SECONDS if deadline is None else min(STOP_GRACE_SECONDS, _left(loop, deadline) or 0)
            await asyncio.wait({ended}, timeout=grace)
    if ended.done() and not ended.cancelled():
        return ended.result()
    if call.abandon():
        return await ended
    if isinstance(ended, asyncio.Task):
        ended.cancel()  # an async body: CancelledError at its next await
    assert signal.reason is not None
    return call.stopped(signal.reason, timeout)


async def _first(ended: asyncio.Future[ToolOutcome], told: asyncio.Event, timeout: float | None) -> None:
    waiter = asyncio.ensure_future(told.wait())
    either: set[asyncio.Future[Any]] = {ended, waiter}
    try:
        await asyncio.wait(either, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


def _left(loop: asyncio.AbstractEventLoop, deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - loop.time())


def _running(key: CallKey) -> concurrent.futures.Future[ToolOutcome] | None:
    with _threads_lock:
        return _threads.get(key)


def _start(call: ToolCall, tool_input: Any, record: Recorder) -> asyncio.Task[ToolOutcome] | concurrent.futures.Future[ToolOutcome]:
    """Start the body: an async one as a task here, a sync one on a daemon thread."""
    if inspect.iscoroutinefunction(call.tool.execute):
        return asyncio.ensure_future(_run_async(call, tool_input, record))
    ending: concurrent.futures.Future[ToolOutcome] = concurrent.futures.Future()
    with _threads_lock:
        _threads[call.key] = ending
    context = contextvars.copy_context()  # DBOS's context, as asyncio.to_thread would pass it
    thread = threading.Thread(
        target=context.run, args=(_run_sync, call, tool_input, record, ending),
        name=f"helix-tool-{call.tool.name}-{call.call.id}", daemon=True,
    )
    thread.start()
    return ending


async def _run_async(call: ToolCall, tool_input: Any, record: Recorder) -> ToolOutcome:
    try:
        outcome = call.returned(await call.tool.run(tool_input, call.ctx))
    except Exception as exc:
        outcome = call.raised(exc)
    if call.ended():
        await asyncio.to_thread(_record, record, outcome)
    return outcome


def _run_sync(call: ToolCall, tool_input: Any, record: Recorder, ending: concurrent.futures.Future[ToolOutcome]) -> None:
    try:
        try:
            assert callable(call.tool.execute)
            value = call.tool.execute(tool_input, call.ctx)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            outcome = call.returned(value)
        except Exception as exc:
            outcome = call.raised(exc)
        if call.ended():
            _record(record, outcome)
        ending.set_result(outcome)
    except BaseException as exc:  # SystemExit and the like: nobody waits for a result forever
        ending.set_exception(exc)
        raise
    finally:
        with _threads_lock:
            if _threads.get(call.key) is ending:
                del _threads[call.key]


async def _awaited(value: Any) -> Any:
    return await value


def _record(record: Recorder, outcome: ToolOutcome) -> None:
    try:
        record(outcome)
    except Exception:  # the step's own checkpoint still holds the outcome it waited for
        logger.warning("could not record the outcome of tool call %s", outcome.tool_call_id, exc_info=True)
