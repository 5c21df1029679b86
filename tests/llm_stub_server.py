"""A scripted LLM provider on 127.0.0.1 for adapter tests: real HTTP, no mocking.

It serves a queue of canned responses (status, JSON body, headers) to any POST, in
order, and records every request it received::

    with StubLLMServer() as server:
        server.add(openai_chat(content="hi"))
        ...  # call litellm with api_base=server.openai_base
        assert server.requests[0].body["model"] == "gpt-4o"

It speaks whatever the queued bodies say: OpenAI chat completions at
``/v1/chat/completions`` and the Anthropic Messages API at ``/v1/messages`` are both
just paths. A response built by :func:`openai_stream` is sent as Server-Sent Events in
OpenAI's streaming format (``data: <chunk>`` lines, then ``data: [DONE]``), a pause
between chunks. When the queue is empty it answers 599 so a test that makes one request
too many fails loudly instead of hanging.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StubResponse:
    """One scripted answer: HTTP status, JSON body and extra headers; or, with ``chunks``,
    a stream of those chunks ``chunk_delay`` seconds apart, cut off without ``[DONE]`` when
    ``cut_after`` chunks are sent. ``sent_at`` gets the ``time.monotonic()`` at which each
    chunk was written (a system-wide clock: comparable with other processes' readings)."""

    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[dict[str, Any]] | None = None
    chunk_delay: float = 0.0
    cut_after: int | None = None
    sent_at: list[float] = field(default_factory=list)


@dataclass
class RecordedRequest:
    """One request the stub received."""

    path: str
    headers: dict[str, str]
    body: Any


class StubLLMServer:
    """A threaded HTTP server bound to a free port on 127.0.0.1; use as a context manager."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._queue: list[StubResponse] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_base(self) -> str:
        """``api_base`` for ``openai/<model>`` (litellm appends ``/chat/completions``)."""
        return f"{self.base_url}/v1"

    def add(self, *responses: StubResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    def __enter__(self) -> StubLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _serve(self, request: RecordedRequest) -> StubResponse:
        with self._lock:
            self.requests.append(request)
            if not self._queue:
                return StubResponse({"error": {"message": "stub queue is empty"}}, status=599)
            return self._queue.pop(0)


def _handler_for(server: StubLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            request = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            self._reply(server._serve(request))

        def _reply(self, response: StubResponse) -> None:
            if response.chunks is not None:
                self._stream(response)
                return
            payload = json.dumps(response.body).encode()
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, response: StubResponse) -> None:
            """HTTP/1.1 chunked transfer, as providers send it: a cut stream lacks the last chunk."""
            self.protocol_version = "HTTP/1.1"
            self.close_connection = True
            self.send_response(response.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            assert response.chunks is not None
            for number, chunk in enumerate(response.chunks):
                if number == response.cut_after:
                    return  # the connection closes mid-stream
                if number and response.chunk_delay:
                    time.sleep(response.chunk_delay)
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                response.sent_at.append(time.monotonic())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:  # silence stderr noise
            pass

    return Handler


# --- response builders ------------------------------------------------------------------


def openai_chat(
    content: str | None = None,
    tool_calls: list[tuple[str, str, str]] | None = None,
    finish_reason: str = "stop",
    model: str = "gpt-4o",
    reasoning_content: str | None = None,
    usage: tuple[int, int] = (11, 7),
) -> StubResponse:
    """An OpenAI chat completion; ``tool_calls`` are ``(id, name, raw_arguments_json)``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}
            for id_, name, args in tool_calls
        ]
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    prompt, completion = usage
    return StubResponse(
        {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
    )


def openai_stream(
    content: list[str] | None = None,
    tool_calls: list[tuple[str, str, list[str]]] | None = None,
    reasoning: list[str] | None = None,
    finish_reason: str = "stop",
    model: str = "gpt-4o",
    usage: tuple[int, int] = (11, 7),
    chunk_delay: float = 0.0,
    cut_after: int | None = None,
) -> StubResponse:
    """An OpenAI chat completion streamed as chunks: ``reasoning`` pieces, then ``content``
    pieces, then each tool call ``(id, name, argument_fragments)`` (id and name on its
    first chunk only), a finish chunk, and a usage chunk (``stream_options.include_usage``)."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"reasoning_content": piece} for piece in reasoning or []]
    deltas += [{"content": piece} for piece in content or []]
    for index, (id_, name, fragments) in enumerate(tool_calls or []):
        deltas.append({"tool_calls": [{"index": index, "id": id_, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": f}}]} for f in fragments]
    base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model}
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]})
    prompt, completion = usage
    chunks.append({**base, "choices": [], "usage": {
        "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
    return StubResponse({}, chunks=chunks, chunk_delay=chunk_delay, cut_after=cut_after)


def openai_error(status: int, message: str, headers: dict[str, str] | None = None) -> StubResponse:
    """An OpenAI-style error body with the given HTTP status."""
    body = {"error": {"message": message, "type": "stub_error", "param": None, "code": None}}
    return StubResponse(body, status=status, headers=headers or {})


def anthropic_message(
    content: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    model: str = "claude-sonnet-4-5",
    usage: tuple[int, int] = (21, 9),
) -> StubResponse:
    """An Anthropic Messages API response with the given content blocks."""
    prompt, completion = usage
    return StubResponse(
        {
            "id": "msg_stub",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": completion},
        }
    )
