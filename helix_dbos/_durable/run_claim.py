"""Claiming a run: the one transaction that makes a run exist for every reader.

It writes what a run begins with: the session (when new, with its owner), the session
reopened for the run, the user's message, the run's row, and its ``run_start`` and first
``step_start`` events, with one statement (``helix.claim_run``). Two parties run it for
the same run, in either order, and the first one writes:

- the caller that started the run's workflow (``executor.execute``, ``RunEnqueuer``),
  right after the start, so that when the call returns the session and its run are
  committed and any connection reads them, even while the run waits on a queue;
- the run's workflow, in its first checkpointed transaction (``AgentRuntime.begin_run``),
  for a run no caller claimed (a child run started from workflow code, or a caller that
  died right after the start); it also takes, from the same statement, the queue DBOS
  placed it on and the transcript and state it starts from::

      with pool.connection() as conn:
          claim = claim_run(conn, request, agent.initial_state(), context=True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import Connection

from helix_dbos._durable.payloads import RunRequest
from helix_dbos._store import reads, writes
from helix_dbos.errors import ConfigurationError, SessionBusyError, SessionNotFoundError
from helix_dbos.events import RunStartEvent
from helix_dbos.orchestration import synthesize_finish_tool_result
from helix_dbos.types import Message, MessageAdapter, UserMessage


APART = (
    "helix's database is not DBOS's system database: helix keeps its tables next to DBOS's so that an"
    " answer and the message that delivers it commit together. Give DBOS(config=...)"
    " system_database_url and DBOSAgentExecutor(database_url=...) the same URL"
)
"""Why a run cannot be claimed where its workflow is not (:func:`claim_run`)."""


@dataclass(frozen=True)
class RunClaim:
    """Where the claimed run begins: the session's step count and message count after
    the user's message, the seq of its ``run_start`` event and the queue DBOS placed its
    workflow on; with ``context``, the transcript (the user's message last) and the state
    the run starts from. Or why the run must not touch the session (``refused``,
    nothing written)."""

    step_count: int = 0
    message_seq: int = 0
    start_seq: int = 0
    queue: str | None = None
    context: tuple[list[Message], dict[str, Any]] | None = None
    refused: str | None = None


def claim_run(conn: Connection[Any], request: RunRequest, initial_state: dict[str, Any] | None, *,
              context: bool = False) -> RunClaim:
    """Claim run ``request.run`` of its session on ``conn`` (one statement: in autocommit,
    or in the caller's transaction), or find it claimed already, with one statement; raises
    :class:`SessionBusyError` when another run holds the session,
    :class:`SessionNotFoundError` to resume a session that does not exist, and
    :class:`ConfigurationError` when DBOS does not know the run's workflow in this
    database (nothing claimed). ``initial_state`` is a new session's state at step 0
    (None when the caller does not know the agent: the workflow adds it). ``context``:
    also read the transcript and state the run starts from."""
    assert request.parked is None, "a continuation is not claimed"
    found = writes.claim_run(conn, _claim_payload(request, initial_state, context))
    if found.get("apart"):
        raise ConfigurationError(APART)
    if found.get("missing"):
        raise SessionNotFoundError(f"no session {request.session_id!r}")
    if "busy" in found:
        raise SessionBusyError(f"session {request.session_id!r} already has a run in progress (run {found['busy']})")
    if "parent" in found:
        return RunClaim(refused=_not_the_child(request, (found["parent"], found["call"])))
    return RunClaim(
        step_count=found["step_count"], message_seq=found["message_seq"], start_seq=found["start_seq"],
        queue=found["queue"], context=_context(found) if context else None,
    )


def _claim_payload(request: RunRequest, initial_state: dict[str, Any] | None, context: bool) -> dict[str, Any]:
    """``helix.claim_run``'s argument: the run, and the rows its claim may write."""
    start = RunStartEvent(run=request.run, kind=request.kind, input=request.input)
    return {
        **request.model_dump(
            mode="json", include={"session_id", "run", "kind", "agent_name", "owner", "root_session_id",
                                  "parent_session_id", "parent_tool_call_id"},
        ),
        "workflow_id": request.workflow_id,
        "initial_state": initial_state,
        "input": [] if request.input is None else [UserMessage(content=request.input).model_dump(mode="json", exclude_none=True)],
        "finish_result": synthesize_finish_tool_result("").model_dump(mode="json", exclude_none=True),
        "run_start": start.to_row(),
        "context": context,
    }


def _context(found: dict[str, Any]) -> tuple[list[Message], dict[str, Any]]:
    snapshot = found["snapshot"]
    state = {} if snapshot is None else reads.replay_state(snapshot["state"], found["patches"])
    return [MessageAdapter.validate_python(m) for m in found["messages"]], state


def _not_the_child(request: RunRequest, parent: tuple[str | None, str | None]) -> str:
    parent_id, call = parent
    recorded = f"the session of call {call!r} of {parent_id!r}" if parent_id else "not a sub-agent session"
    return (
        f"session {request.session_id!r} is not a sub-agent session of {request.parent_session_id!r}"
        f" (call {request.parent_tool_call_id!r}): it is {recorded}; this run changed nothing"
    )
