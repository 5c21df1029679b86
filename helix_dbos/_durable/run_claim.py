"""Claiming a run: the one transaction that makes a run exist for every reader.

It writes what a run begins with: the session (when new, with its owner), the session
reopened for the run, the user's message, the run's row, and its ``run_start`` and first
``step_start`` events. Two parties run it for the same run, in either order, and the
first one writes:

- the caller that started the run's workflow (``executor.execute``, ``RunEnqueuer``),
  right after the start, so that when the call returns the session and its run are
  committed and any connection reads them, even while the run waits on a queue;
- the run's workflow, in its first checkpointed transaction (``AgentRuntime.begin_run``),
  for a run no caller claimed (a child run started from workflow code, or a caller that
  died right after the start)::

      with engine.begin() as conn:
          claim_run(conn, request, agent.initial_state())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helix_dbos._durable.payloads import RunRequest, run_workflow_id
from helix_dbos._store import reads, writes
from helix_dbos._store.records import KeyedEvent
from helix_dbos.errors import ConfigurationError, SessionBusyError, SessionNotFoundError
from helix_dbos.events import RunStartEvent, StepStartEvent
from helix_dbos.orchestration import find_unpaired_finish_call_id, synthesize_finish_tool_result
from helix_dbos.types import ACTIVE_STATUSES, Message, SessionStatus, UserMessage


APART = (
    "helix's database is not DBOS's system database: helix keeps its tables next to DBOS's so that an"
    " answer and the message that delivers it commit together. Give DBOS(config=...)"
    " system_database_url and DBOSAgentExecutor(database_url=...) the same URL"
)
"""Why a run cannot be claimed where its workflow is not (:func:`require_together`)."""


def require_together(conn: Any, request: RunRequest) -> None:
    """Raise :class:`ConfigurationError` unless the run's workflow is in this database (a
    DBOS system database apart from helix's), before anything is claimed."""
    if not reads.workflow_exists(conn, request.workflow_id):
        raise ConfigurationError(APART)


@dataclass(frozen=True)
class RunClaim:
    """Where the claimed run begins: the session's step count and message count after
    the user's message, and the seq of its ``run_start`` event; or why the run must not
    touch the session (``refused``, nothing written)."""

    step_count: int = 0
    message_seq: int = 0
    start_seq: int = 0
    refused: str | None = None


def claim_run(conn: Any, request: RunRequest, initial_state: dict[str, Any] | None) -> RunClaim:
    """Claim run ``request.run`` of its session on ``conn`` (a SQLAlchemy connection in a
    transaction), or find it claimed already; raises :class:`SessionBusyError` when
    another run holds the session, :class:`SessionNotFoundError` to resume a session
    that does not exist. ``initial_state`` is a new session's state at step 0 (None
    when the caller does not know the agent: the workflow adds it)."""
    sid = request.session_id
    row = writes.lock_session(conn, sid)
    if row is None:
        if request.kind == "resume":
            raise SessionNotFoundError(f"no session {sid!r}")
        writes.insert_session(
            conn, session_id=sid, agent_name=request.agent_name, initial_state=initial_state,
            root_session_id=request.root_session_id or sid, parent_session_id=request.parent_session_id,
            parent_tool_call_id=request.parent_tool_call_id, owner=request.owner,
        )
        row = writes.lock_session(conn, sid)  # ours, or the one a concurrent claim of this run committed
        assert row is not None
    if request.parent_session_id is not None:
        parent = (row["parent_session_id"], row["parent_tool_call_id"])
        if parent != (request.parent_session_id, request.parent_tool_call_id):
            return RunClaim(refused=_not_the_child(request, parent))
    begun = reads.run_begun(conn, sid, request.run) if row["run_count"] == request.run else None
    if begun is not None:
        if initial_state is not None and request.run == 1:
            writes.insert_initial_snapshot(conn, sid, initial_state)
        return RunClaim(step_count=begun[0], message_seq=row["message_count"], start_seq=begun[1])
    if not _unbegun(row) and (row["status"] in ACTIVE_STATUSES or row["run_count"] >= request.run):
        raise SessionBusyError(f"session {sid!r} already has a run in progress (run {row['run_count']})")
    return _begin(conn, request, row)


def _begin(conn: Any, request: RunRequest, row: dict[str, Any]) -> RunClaim:
    sid, step_count, start_seq = request.session_id, row["step_count"], row["event_seq"] + 1
    writes.reopen_session(conn, sid, request.run)
    message_count = _add_input_messages(conn, request, row)
    writes.insert_run(
        conn, session_id=sid, run=request.run, workflow_id=run_workflow_id(sid, request.run),
        kind=request.kind, start_step=step_count, start_seq=start_seq,
    )
    writes.append_events(conn, sid, request.run, step_count, [RunStartEvent(run=request.run, kind=request.kind, input=request.input)])
    first = step_count + 1  # the first step's step_start; the next ones come with each commit
    writes.append_keyed_events(
        conn, sid, request.run, first, [KeyedEvent.at(request.run, first, "step_start", StepStartEvent(step=first))]
    )
    return RunClaim(step_count=step_count, message_seq=message_count, start_seq=start_seq)


def _unbegun(row: dict[str, Any]) -> bool:
    """The session was created for its first run, which has not begun (a new session, or
    a sub-agent session its parent created for its call)."""
    return bool(row["run_count"] == 0 and row["status"] == SessionStatus.ACTIVE)


def _not_the_child(request: RunRequest, parent: tuple[str | None, str | None]) -> str:
    parent_id, call = parent
    recorded = f"the session of call {call!r} of {parent_id!r}" if parent_id else "not a sub-agent session"
    return (
        f"session {request.session_id!r} is not a sub-agent session of {request.parent_session_id!r}"
        f" (call {request.parent_tool_call_id!r}): it is {recorded}; this run changed nothing"
    )


def _add_input_messages(conn: Any, request: RunRequest, row: dict[str, Any]) -> int:
    """Pair a ``__finish__`` call the history left without a result, and append the user's message."""
    new: list[Message] = []
    if request.kind == "execute" and row["message_count"] > 0:
        dangling = find_unpaired_finish_call_id(reads.load_messages_since_last_assistant(conn, request.session_id))
        if dangling is not None:
            new.append(synthesize_finish_tool_result(dangling))
    if request.input is not None:
        new.append(UserMessage(content=request.input))
    if not new:
        return int(row["message_count"])
    return writes.append_messages(conn, request.session_id, request.run, row["step_count"], new)
