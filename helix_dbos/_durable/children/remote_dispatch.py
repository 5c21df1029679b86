"""Remote sub-agents as workflow code (definitions: ``helix_dbos/remote.py``).

A remote child is two DBOS steps of the parent, in call order after the local children::

    remote_start    GET /status of the child's session: known (a recovered parent, or a
                    retry) -> re-attach; unknown -> POST /start with the deterministic id
    remote_result   follow GET /sse of the child, proxying each frame into the parent's
                    stream (keyed sub:<child>:<seq>, so a re-attached parent writes
                    nothing twice), until GET /status says no run is in progress; its
                    output is the child's status, output and error. Meanwhile the
                    parent's session is watched: an interrupt is sent on (POST
                    /interrupt), an abort too (POST /abort).

Connection failures and 5xx answers are retried inside the steps; a 4xx (unknown agent,
refused credentials) is an error result for the model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from dbos import DBOS, StepOptions

from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import current_runtime
from helix_dbos._durable.streaming import StepEvents, tool_result_events
from helix_dbos.events import SubAgentEventEvent, SubAgentFinishEvent, SubAgentStartEvent
from helix_dbos.orchestration import create_sub_agent_result_message
from helix_dbos.remote import RemoteSubAgentSpec, remote_session_id
from helix_dbos._store import reads
from helix_dbos._store.pools import Pool
from helix_dbos._store.records import KeyedEvent, SessionRecord
from helix_dbos._text import storable
from helix_dbos.types import ACTIVE_STATUSES, SUB_AGENT_TOOL_PREFIX, ParsedSubAgentCall, ToolResultMessage

RETRY_SECONDS = 0.5
"""How long to wait before asking an unreachable remote server again."""
WATCH_SECONDS = 0.25
"""How often the parent's session is read for an interrupt or abort to send on."""
_RETRIES: StepOptions = {"retries_allowed": True, "max_attempts": 20, "interval_seconds": 0.5, "backoff_rate": 1.5}


class RemoteUnavailable(Exception):
    """The remote server did not answer, or answered 5xx: the step retries."""


async def run_remote_child(
    scope: RunScope, step_no: int, call: ParsedSubAgentCall, spec: RemoteSubAgentSpec, events: StepEvents
) -> ToolResultMessage:
    """Run the call's child on the remote server to its end; its result."""
    tool = scope.tool(f"{SUB_AGENT_TOOL_PREFIX}{call.agent_type}")
    try:
        if call.parse_error is not None:
            raise ValueError(f"Invalid arguments for sub-agent {call.agent_type}: {call.parse_error}")
        child_input = storable(spec.child_input(tool.parse_input(call.input)))
    except Exception as exc:
        return create_sub_agent_result_message(call.id, call.agent_type, success=False, error=str(exc))
    child = remote_session_id(scope.session_id, call.id)
    events.publish([(f"child_start:{call.id}", SubAgentStartEvent(tool_call_id=call.id, session_id=child, agent=spec.agent))])
    started = await DBOS.run_step_async({"name": "remote_start", **_RETRIES}, remote_start, spec, child, child_input)
    if started.get("error"):
        ended: dict[str, Any] = {"status": "failed", "error": started["error"]}
    else:
        ended = await DBOS.run_step_async(
            {"name": "remote_result", **_RETRIES}, remote_result, spec, child, scope.session_id, scope.request.run, step_no
        )
    if ended["status"] == "completed":
        message = create_sub_agent_result_message(call.id, call.agent_type, result=ended.get("output"), success=True)
    else:
        error = f"Sub-agent {call.agent_type} {ended['status']}: {ended.get('error') or 'no output'}"
        message = create_sub_agent_result_message(call.id, call.agent_type, success=False, error=error)
    finish = SubAgentFinishEvent(tool_call_id=call.id, session_id=child, status=ended["status"])
    events.publish([(f"child_finish:{call.id}", finish), *tool_result_events([message])])
    return message


async def remote_start(spec: RemoteSubAgentSpec, child: str, child_input: str) -> dict[str, Any]:
    """Start the child on the remote server once: ``{"attached": bool}`` or ``{"error"}``."""
    async with httpx.AsyncClient(timeout=30) as client:
        known = await _request(client, "GET", f"{spec.url}/status", spec, params={"session_id": child})
        if known.status_code == 200:
            return {"attached": True}
        if known.status_code != 404:
            return {"error": _refusal(known)}
        body = {"agent": spec.agent, "input": child_input, "session_id": child}
        started = await _request(client, "POST", f"{spec.url}/start", spec, json=body)
    if started.status_code == 202:
        return {"attached": False}
    if started.status_code == 409:  # started meanwhile, by this call's earlier attempt
        return {"attached": True}
    return {"error": _refusal(started)}


async def remote_result(spec: RemoteSubAgentSpec, child: str, parent: str, run: int, step: int) -> dict[str, Any]:
    """Follow the child to its end, proxying its stream; ``{"status", "output", "error"}``."""
    writer = current_runtime().live_events
    last = 0
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=None)) as client:
        watch = asyncio.create_task(_send_on_stop(client, spec, child, parent))
        try:
            while True:
                try:
                    async for frame in _frames(client, spec, child, last):
                        key = f"sub:{child}:{frame['seq']}"
                        event = {"seq": frame["seq"], "type": frame["type"], "data": frame["data"]}
                        writer.write(parent, run, step, [KeyedEvent(key=key, event=SubAgentEventEvent(session_id=child, event=event))])
                        last = int(frame["seq"])
                    status = (await _request(client, "GET", f"{spec.url}/status", spec, params={"session_id": child})).json()
                except (httpx.TransportError, RemoteUnavailable, json.JSONDecodeError):
                    await asyncio.sleep(RETRY_SECONDS)
                    continue
                if status.get("status") not in ACTIVE_STATUSES:
                    return {"status": status["status"], "output": status.get("output"), "error": status.get("error")}
                await asyncio.sleep(RETRY_SECONDS)
        finally:
            watch.cancel()


async def _frames(client: httpx.AsyncClient, spec: RemoteSubAgentSpec, child: str, after: int) -> AsyncIterator[dict[str, Any]]:
    """The child's durable events after seq ``after``, until it has no run in progress."""
    params = {"session_id": child, "last_event_id": str(after)}
    async with client.stream("GET", f"{spec.url}/sse", params=params, headers=spec.headers()) as response:
        if response.status_code >= 500:
            raise RemoteUnavailable(f"{spec.url}/sse answered {response.status_code}")
        if response.status_code != 200:
            return
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                frame = json.loads("\n".join(data))
                data = []
                if "seq" in frame:  # a durable event (token deltas are not asked for)
                    yield frame


async def _send_on_stop(client: httpx.AsyncClient, spec: RemoteSubAgentSpec, child: str, parent: str) -> None:
    """Send the parent's interrupt or abort on to the child, once each."""
    runtime = current_runtime()
    interrupted = False
    while True:
        row = await asyncio.to_thread(_parent_row, runtime.pool, parent)
        if row is not None and row.status == "aborted":
            await _best_effort(client, f"{spec.url}/abort", spec, {"session_id": child, "reason": "its parent was aborted"})
            return
        if row is not None and row.interrupt_requested and not interrupted:
            interrupted = await _best_effort(client, f"{spec.url}/interrupt", spec, {"session_id": child})
        await asyncio.sleep(WATCH_SECONDS)


def _parent_row(pool: Pool, parent: str) -> SessionRecord | None:
    with pool.connection() as conn:
        return reads.get_session_row(conn, parent)


async def _best_effort(client: httpx.AsyncClient, url: str, spec: RemoteSubAgentSpec, body: dict[str, Any]) -> bool:
    try:
        await client.post(url, json=body, headers=spec.headers())
        return True
    except httpx.TransportError:
        return False


async def _request(client: httpx.AsyncClient, method: str, url: str, spec: RemoteSubAgentSpec, **kwargs: Any) -> httpx.Response:
    try:
        response = await client.request(method, url, headers=spec.headers(), **kwargs)
    except httpx.TransportError as exc:
        raise RemoteUnavailable(f"{url}: {exc}") from exc
    if response.status_code >= 500:
        raise RemoteUnavailable(f"{url} answered {response.status_code}")
    return response


def _refusal(response: httpx.Response) -> str:
    try:
        body = response.json()
        why = body.get("message") or body.get("error") or response.text
    except ValueError:
        why = response.text
    return f"the remote agent server refused ({response.status_code}): {why}"
