"""Answered calls a run has not settled yet: what the console says about them.

Answering a call records the answer at once, but the call stays pending, and its session
``awaiting_approval`` / ``awaiting_client_tool``, until the run has settled the step:

1. *received*: the step's waiter workflow (the pending call's ``workflow_id``) waits until
   every call of the step is answered, then takes the answers and starts the run's
   continuation, which becomes the run's workflow;
2. *taken*: the continuation waits on the run's queue for a worker (``ENQUEUED``), then
   settles the step (runs the approved calls) and commits it, which ends the wait: the
   calls leave the pending list and the session's status changes.

The session page shows each answered call with a note from :func:`call_notes` and, when
every call its session waits for is answered, a note beside its stale status from
:func:`status_note`; once the run has settled the step, the page (kept current by its
live stream) lists the call among the answers instead. Everything here reads what :func:`~helix_dbos._client.commands.session_detail`
read already (the pending calls and the runs with their DBOS workflow's status), and
the answers (``reads.answers_async``, one read per session not read yet).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from psycopg import AsyncConnection

from helix_dbos._store import reads
from helix_dbos._store.records import AnswerRecord, PendingToolCall, RunRecord

Received = dict[tuple[str, str], AnswerRecord]
"""Answers recorded for calls still pending, by ``(session, tool call)``."""


async def received_answers(
    conn: AsyncConnection[Any], calls: list[PendingToolCall], known: dict[str, list[AnswerRecord]] | None = None
) -> Received:
    """The answers recorded for pending ``calls``; ``known`` holds sessions' answers read
    already (those sessions are not read again)."""
    answers = dict(known or {})
    for session_id in {call.session_id for call in calls} - answers.keys():
        answers[session_id] = await reads.answers_async(conn, session_id)
    by_call = {(a.session_id, a.tool_call_id): a for found in answers.values() for a in found}
    return {key: by_call[key] for call in calls if (key := (call.session_id, call.tool_call_id)) in by_call}


def call_notes(
    session_id: str, calls: list[PendingToolCall], received: Received, runs: list[RunRecord]
) -> dict[tuple[str, str], str]:
    """For each answered call, where its answer is: waiting for the step's other calls,
    received, or taken by the run (for the calls of ``session_id``, whose ``runs`` are known)."""
    unanswered = Counter((c.session_id, c.step) for c in calls if (c.session_id, c.tool_call_id) not in received)
    by_number = {run.run: run for run in runs}
    notes = {}
    for call in calls:
        key = (call.session_id, call.tool_call_id)
        if key not in received:
            continue
        others = unanswered[(call.session_id, call.step)]
        run = by_number.get(call.run) if call.session_id == session_id else None
        if others:
            calls_are = "call of step {} is" if others == 1 else f"{others} calls of step {{}} are"
            notes[key] = f"Answer received · the run takes it once the other {calls_are.format(call.step)} answered."
        elif run is not None and run.workflow_id != call.workflow_id:
            notes[key] = f"Answer taken · {_settling(run, call.step)}."
        else:
            notes[key] = "Answer received · waiting for the run to take it."
    return notes


def status_note(session_id: str, calls: list[PendingToolCall], received: Received, runs: list[RunRecord]) -> str | None:
    """What the session's ``awaiting_*`` status leaves out, when every call it waits for is
    answered: ``answer received · waiting for the run to take it``, or taken and settling."""
    own = [c for c in calls if c.session_id == session_id]
    if not own or any((c.session_id, c.tool_call_id) not in received for c in own):
        return None
    answers = "answer" if len(own) == 1 else "answers"
    call = own[-1]
    run = next((r for r in runs if r.run == call.run), None)
    if run is not None and run.workflow_id != call.workflow_id:
        return f"{answers} taken · {_settling(run, call.step)}"
    return f"{answers} received · waiting for the run to take {'it' if len(own) == 1 else 'them'}"


def _settling(run: RunRecord, step: int) -> str:
    if run.workflow_status == "ENQUEUED":
        return "the run waits on its queue for a worker"
    return f"the run is settling step {step}"
