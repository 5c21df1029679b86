"""A run as the AI SDK's UI message stream (protocol v1), the stream ``useChat`` reads.

One run of a session is one assistant message of the chat. :class:`UIMessageStream`
folds the run's durable events and live deltas, in the order a reader gets them, into
the message's chunks; it does no I/O, so the HTTP server feeds it and writes what it
returns (each chunk a ``data: <json>`` frame, :func:`encode`, then :data:`DONE`)::

    >>> ui = UIMessageStream("s1", run=1)
    >>> ui.start()
    [{'type': 'start', 'messageId': 's1:run:1', 'messageMetadata': {'sessionId': 's1', 'run': 1}}]
    >>> ui.event(Record(2, 1, 1, "step_start", {"step": 1}))
    [{'type': 'start-step'}]
    >>> ui.event(Record(3, 1, 1, "text", {"content": "Hi!"}))  # doctest: +NORMALIZE_WHITESPACE
    [{'type': 'text-start', 'id': 'text-1'}, {'type': 'text-delta', 'id': 'text-1', 'delta': 'Hi!'},
     {'type': 'text-end', 'id': 'text-1'}]

What each event becomes:

- ``step_start`` / ``step_finish``: ``start-step`` / ``finish-step``.
- Token deltas of the run's own model: ``text-*`` and ``reasoning-*`` as they come. The
  step's durable ``text`` closes the part and adds what deltas missed (a reader that
  joined mid-step, a dropped delta), so the message always ends as the transcript says.
  A newer attempt of the step (a retry, a re-run after a crash) first sends
  ``reset-step``, which removes what the older attempt showed.
- ``tool_call``: ``tool-input-available`` (``providerExecuted`` unless the tool is
  executed by the client, so ``onToolCall`` fires only for client tools);
  ``tool_approval_request``: ``tool-approval-request`` (its ``approvalId`` is the call's
  id); ``tool_result``: ``tool-output-available``, ``tool-output-error``, or
  ``tool-output-denied`` for a denied approval. The structured-output ``__finish__``
  call is left out (the run's output is in ``finish``'s metadata). A request read before
  its ``tool_call`` (a stream written by an older release, or a step whose events were
  written late) is held and sent right after the call's ``tool-input-available``.
- ``state_patch`` and live state deltas: one ``data-state`` part (id ``state``) holding
  the agent's state, replaced at each change; ``custom`` events: ``data-<name>``;
  sub-agents: one ``data-subagent`` part per child session, replaced as it runs.
- ``finish``: ``finish`` with the run's usage, status and output as message metadata;
  ``error``: ``error``; ``interrupted``: ``finish`` (reason ``other``); ``aborted``: ``abort``.

A run that waits for people (approvals, client tools) pauses the message:
:attr:`UIMessageStream.waiting` names the calls once every other call of the step has
its result, and :meth:`UIMessageStream.pause` ends the stream there; the client's answer
continues the same message from that point (:attr:`UIMessageStream.paused_at`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from helix_dbos.answers import denial_text
from helix_dbos._deltas import DeltaRecord
from helix_dbos.state import apply_rfc6902
from helix_dbos.types import FINISH_TOOL_NAME

Chunk = dict[str, Any]

HEADERS = {
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The response headers of a UI message stream (its media type is ``text/event-stream``)."""

DONE = "data: [DONE]\n\n"
"""The frame that ends a UI message stream."""


def encode(chunk: Chunk) -> str:
    """One chunk as an SSE frame.

    >>> encode({"type": "text-delta", "id": "t", "delta": "é\\n"})
    'data: {"type":"text-delta","id":"t","delta":"é\\\\n"}\\n\\n'
    """
    return f"data: {json.dumps(chunk, separators=(',', ':'), ensure_ascii=False)}\n\n"


def message_id(session_id: str, run: int) -> str:
    """The id of the assistant message that run ``run`` of the session is."""
    return f"{session_id}:run:{run}"


class EventLike(Protocol):
    """A durable event record (``helix_dbos._store.records.EventRecord``)."""

    seq: int
    run: int
    step: int
    type: str
    data: Any


class Record(NamedTuple):
    """A plain :class:`EventLike` (for tests and examples)."""

    seq: int
    run: int
    step: int
    type: str
    data: Any


@dataclass
class _LiveText:
    """What the deltas of one kind (text or reasoning) of the current step showed."""

    part_id: str | None = None
    text: str = ""
    next_index: int = 0
    live: bool = True
    """False once a delta was missed: the durable text completes the part."""


@dataclass
class _Step:
    """The current step: its calls and which of them wait for people."""

    number: int
    calls: list[str] = field(default_factory=list)
    gated: set[str] = field(default_factory=set)
    settled: set[str] = field(default_factory=set)
    attempt: int = 0
    text: dict[str, _LiveText] = field(default_factory=dict)
    text_done: bool = False


class UIMessageStream:
    """The chunks of run ``run`` of ``session_id``, fed its events (and deltas) in order.

    ``state`` is the agent's state when the run began (for ``data-state``);
    ``client_tools`` names the agent's client-executed tools.
    """

    def __init__(
        self, session_id: str, run: int, *, state: Any = None, client_tools: frozenset[str] = frozenset()
    ) -> None:
        self.session_id = session_id
        self.run = run
        self.message_id = message_id(session_id, run)
        self.client_tools = client_tools
        self.ended = False
        self.paused_at: dict[str, int] = {}
        """Call id -> the seq after which the message waited for that call's answer."""
        self._step: _Step | None = None
        self._calls: dict[str, str] = {}
        self._approvals: set[str] = set()
        self._early: dict[str, EventLike] = {}
        """Requests (approval, client tool) read before their call, by call id."""
        self._answered: set[str] = set()
        self._subagents: dict[str, dict[str, Any]] = {}
        self._parts = 0
        self._state = state
        self._committed_step = -1
        self._live_state: dict[str, tuple[int, list[dict[str, Any]]]] = {}

    # --- what the server calls ------------------------------------------------------------

    def start(self) -> list[Chunk]:
        """The message's first chunks."""
        chunks: list[Chunk] = [
            {"type": "start", "messageId": self.message_id, "messageMetadata": {"sessionId": self.session_id, "run": self.run}}
        ]
        if self._state:
            chunks.append(self._state_part(self._state))
        return chunks

    @property
    def waiting(self) -> frozenset[str]:
        """The calls the message waits on (answers from people), once every other call of
        the current step has its result; empty while anything else is still to come."""
        step = self._step
        if step is None or self.ended:
            return frozenset()
        open_calls = [c for c in step.calls if c not in step.settled]
        if open_calls and all(c in step.gated and c not in self._answered for c in open_calls):
            return frozenset(open_calls)
        return frozenset()

    def answered(self, call_ids: list[str]) -> None:
        """The client answered these calls: the message no longer waits on them."""
        self._answered.update(call_ids)

    def pause(self) -> list[Chunk]:
        """The chunks that end the stream while the message waits for people."""
        return [{"type": "finish-step"}, {"type": "finish", "finishReason": "tool-calls"}]

    def event(self, record: EventLike) -> list[Chunk]:
        """The chunks for one durable event of the session (others' runs give none)."""
        if record.run != self.run or self.ended:
            return []
        handler = getattr(self, "_on_" + record.type, None)
        chunks: list[Chunk] = handler(record) if handler is not None else []
        for call_id in self.waiting:
            self.paused_at[call_id] = record.seq
        return chunks

    def delta(self, delta: DeltaRecord) -> list[Chunk]:
        """The chunks for one live delta (a sub-agent's, or another run's, give none)."""
        if delta.session_id != self.session_id or delta.run != self.run or self.ended:
            return []
        if delta.kind == "state":
            return self._live_state_delta(delta)
        if delta.kind not in ("text", "reasoning"):
            return []
        if self._step is not None and (delta.step < self._step.number or delta.step == self._step.number and self._step.text_done):
            return []
        chunks = self._enter_step(delta.step)
        step = self._step
        assert step is not None
        if delta.attempt < step.attempt:
            return chunks
        if delta.attempt > step.attempt:
            if any(live.part_id for live in step.text.values()):
                chunks.append({"type": "reset-step"})
            step.attempt, step.text = delta.attempt, {}
        live = step.text.setdefault(delta.kind, _LiveText())
        if not live.live or delta.index != live.next_index:
            live.live = False
            return chunks
        live.next_index += 1
        if live.part_id is None:
            live.part_id = self._new_part(delta.kind)
            chunks.append({"type": f"{delta.kind}-start", "id": live.part_id})
        live.text += delta.text
        chunks.append({"type": f"{delta.kind}-delta", "id": live.part_id, "delta": delta.text})
        return chunks

    # --- events ---------------------------------------------------------------------------

    def _on_step_start(self, record: EventLike) -> list[Chunk]:
        return self._enter_step(record.step)

    def _on_text(self, record: EventLike) -> list[Chunk]:
        chunks = self._enter_step(record.step)
        step = self._step
        assert step is not None
        content = str(record.data.get("content") or "")
        live = step.text.get("text")
        shown = False
        if live is not None and live.part_id is not None:
            if content.startswith(live.text):
                if content != live.text:
                    chunks.append({"type": "text-delta", "id": live.part_id, "delta": content[len(live.text):]})
                chunks.append({"type": "text-end", "id": live.part_id})
                live.part_id, shown = None, True
            else:  # the deltas were of an attempt the step did not keep
                chunks.append({"type": "reset-step"})
                step.text = {}
        chunks.extend(self._close_text())
        if content and not shown:
            part_id = self._new_part("text")
            chunks += [
                {"type": "text-start", "id": part_id},
                {"type": "text-delta", "id": part_id, "delta": content},
                {"type": "text-end", "id": part_id},
            ]
        return chunks

    def _on_tool_call(self, record: EventLike) -> list[Chunk]:
        chunks = self._enter_step(record.step) + self._close_text()
        call_id, name = record.data["tool_call_id"], record.data["tool_name"]
        if name == FINISH_TOOL_NAME:
            return chunks
        assert self._step is not None
        self._step.calls.append(call_id)
        self._calls[call_id] = name
        chunks.append({
            "type": "tool-input-available", "toolCallId": call_id, "toolName": name,
            "input": record.data.get("input"), "providerExecuted": name not in self.client_tools,
        })
        early = self._early.pop(call_id, None)
        if early is not None:
            chunks += self.event(early)
        return chunks

    def _on_tool_approval_request(self, record: EventLike) -> list[Chunk]:
        call_id = record.data["tool_call_id"]
        if call_id not in self._calls:
            self._early[call_id] = record
            return []
        self._gate(call_id)
        self._approvals.add(call_id)
        return [{"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id}]

    def _on_tool_start(self, record: EventLike) -> list[Chunk]:
        call_id = record.data["tool_call_id"]
        if call_id in self._calls:
            self._gate(call_id)
        else:
            self._early[call_id] = record
        return []

    def _on_tool_result(self, record: EventLike) -> list[Chunk]:
        call_id, content = record.data["tool_call_id"], str(record.data.get("content", ""))
        if call_id not in self._calls:
            return []
        if self._step is not None:
            self._step.settled.add(call_id)
        if call_id in self._approvals and record.data.get("is_error") and content.startswith(denial_text(call_id)):
            return [{"type": "tool-output-denied", "toolCallId": call_id}]
        if record.data.get("is_error"):
            return [{"type": "tool-output-error", "toolCallId": call_id, "errorText": content}]
        return [{"type": "tool-output-available", "toolCallId": call_id, "output": _json_or_text(content)}]

    def _on_state_patch(self, record: EventLike) -> list[Chunk]:
        self._committed_step = max(self._committed_step, record.step)
        self._live_state.clear()
        try:
            self._state = apply_rfc6902(self._state or {}, record.data.get("patches") or [])
        except Exception:
            return []  # a patch of a state this stream never saw: leave the part as it is
        return [self._state_part(self._state)]

    def _on_custom(self, record: EventLike) -> list[Chunk]:
        return [{"type": f"data-{record.data['name']}", "data": record.data.get("data")}]

    def _on_subagent_start(self, record: EventLike) -> list[Chunk]:
        child = record.data["session_id"]
        self._subagents[child] = {
            "sessionId": child, "agent": record.data["agent"], "toolCallId": record.data["tool_call_id"], "status": "running",
        }
        return [self._subagent_part(child)]

    def _on_subagent_event(self, record: EventLike) -> list[Chunk]:
        child = record.data["session_id"]
        if child not in self._subagents:
            return []
        inner = record.data.get("event") or {}
        self._subagents[child]["event"] = {"type": inner.get("type"), "data": inner.get("data")}
        return [self._subagent_part(child)]

    def _on_subagent_finish(self, record: EventLike) -> list[Chunk]:
        child = record.data["session_id"]
        if child not in self._subagents:
            return []
        self._subagents[child]["status"] = record.data["status"]
        return [self._subagent_part(child)]

    def _on_step_finish(self, record: EventLike) -> list[Chunk]:
        return self._close_text() + [{"type": "finish-step"}]

    def _on_finish(self, record: EventLike) -> list[Chunk]:
        self.ended = True
        metadata = {"status": "completed", "usage": record.data.get("usage") or {}, "output": record.data.get("output")}
        return self._close_text() + [{"type": "finish", "finishReason": "stop", "messageMetadata": metadata}]

    def _on_error(self, record: EventLike) -> list[Chunk]:
        self.ended = True
        return self._close_text() + [{"type": "error", "errorText": str(record.data.get("error") or "the run failed")}]

    def _on_interrupted(self, record: EventLike) -> list[Chunk]:
        self.ended = True
        metadata = {"status": "interrupted"}
        return self._close_text() + [{"type": "finish", "finishReason": "other", "messageMetadata": metadata}]

    def _on_aborted(self, record: EventLike) -> list[Chunk]:
        self.ended = True
        return self._close_text() + [{"type": "abort", "reason": str(record.data.get("reason") or "aborted")}]

    # --- helpers --------------------------------------------------------------------------

    def _enter_step(self, number: int) -> list[Chunk]:
        if self._step is not None and number <= self._step.number:
            return []
        chunks = self._close_text()
        self._step = _Step(number)
        return chunks + [{"type": "start-step"}]

    def _close_text(self) -> list[Chunk]:
        """End the current step's open text and reasoning parts: its model call is over."""
        step = self._step
        if step is None or step.text_done:
            return []
        step.text_done = True
        return [{"type": f"{kind}-end", "id": live.part_id} for kind, live in step.text.items() if live.part_id]

    def _gate(self, call_id: str) -> None:
        if self._step is not None and call_id in self._step.calls:
            self._step.gated.add(call_id)

    def _new_part(self, kind: str) -> str:
        self._parts += 1
        return f"{kind}-{self._parts}"

    def _live_state_delta(self, delta: DeltaRecord) -> list[Chunk]:
        if delta.step <= self._committed_step or not delta.patch:
            return []
        key = delta.tool_call_id or ""
        attempt, patches = self._live_state.get(key, (delta.attempt, []))
        if delta.attempt > attempt:
            attempt, patches = delta.attempt, []
        elif delta.attempt < attempt:
            return []
        self._live_state[key] = (attempt, [*patches, *delta.patch])
        try:
            state = self._state or {}
            for _, ops in self._live_state.values():
                state = apply_rfc6902(state, ops)
        except Exception:
            return []
        return [self._state_part(state)]

    @staticmethod
    def _state_part(state: Any) -> Chunk:
        return {"type": "data-state", "id": "state", "data": state}

    def _subagent_part(self, child: str) -> Chunk:
        return {"type": "data-subagent", "id": child, "data": dict(self._subagents[child])}


def _json_or_text(content: str) -> Any:
    """A tool result as the model read it: its JSON value, or the text itself."""
    try:
        return json.loads(content)
    except ValueError:
        return content
