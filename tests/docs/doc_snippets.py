"""Run every ```python block of a Markdown document, as a reader would::

    python tests/docs/doc_snippets.py README.md      # prints "ran N python blocks" and exits 0

The rules a document's snippets are written to:

- Blocks run in order, in one interpreter and one namespace, so a later block may use
  what an earlier one defined (the document reads top to bottom). Top-level ``await`` is
  allowed (each such block runs under ``asyncio.run``).
- A block whose first line is ``# NAME.py`` (or ``# NAME.py: ...``), or whose docstring
  begins ``NAME.py:``, is a
  file the reader saves and runs: it is written to the working directory and started as
  ``python NAME.py ARGS`` in the background, ARGS taken from an ``<!-- args: ... -->``
  line right above the block. Every such process must exit 0 by the end.
- The environment is a reader's: ``HELIX_DATABASE_URL`` (a migrated database; the caller
  sets it), ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` pointing at :class:`ObedientModel`, a
  local OpenAI-compatible model that does what its tools ask, and ``MY_GATEWAY_KEY``.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^```python\n(.*?)^```\n", re.S | re.M)
ARGS = re.compile(r"<!-- args: (.*?) -->\n\s*\Z")
FILE_NAME = re.compile(r'\A(?:# (\w+\.py)[:\n]|"""(\w+\.py):)')


@dataclass(frozen=True)
class Snippet:
    """One ```python block: where it starts, its code, and the file it is (if any)."""

    line: int
    code: str
    file_name: str | None
    args: list[str]


def snippets(markdown: str) -> list[Snippet]:
    """The document's python blocks, in order."""
    found = []
    for match in FENCE.finditer(markdown):
        before = markdown[: match.start()]
        args = ARGS.search(before)
        name = FILE_NAME.match(match.group(1))
        found.append(Snippet(
            line=before.count("\n") + 1,
            code=match.group(1),
            file_name=name.group(1) or name.group(2) if name else None,
            args=shlex.split(args.group(1)) if args else [],
        ))
    return found


# --- the model the snippets talk to -----------------------------------------------------


class ObedientModel:
    """An OpenAI chat-completions server on 127.0.0.1 that answers like a willing model:
    it calls the first tool it was given (arguments made from the tool's JSON schema)
    until a tool has answered, then calls ``__finish__`` if it has it, else says "Done.".
    Asked to stream (``"stream": true``), it sends the same answer as one SSE chunk and a
    usage chunk, in OpenAI's format."""

    def __init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler)
        threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"


def reply(request: dict[str, Any]) -> dict[str, Any]:
    """The completion for one chat request."""
    tools = {t["function"]["name"]: t["function"] for t in request.get("tools", [])}
    answered = any(m.get("role") == "tool" for m in request["messages"])
    chosen = next((name for name in tools if name != "__finish__"), None)
    if answered or chosen is None:
        chosen = "__finish__" if "__finish__" in tools else None
    if chosen is None:
        message: dict[str, Any] = {"role": "assistant", "content": "Done."}
    else:
        arguments = example(tools[chosen].get("parameters", {}))
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{len(request['messages'])}", "type": "function",
            "function": {"name": chosen, "arguments": json.dumps(arguments)},
        }]}
    return {
        "id": "chatcmpl-docs", "object": "chat.completion", "created": int(time.time()), "model": request["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if chosen else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def example(schema: dict[str, Any]) -> Any:
    """A value of a JSON schema: its required properties, each an example of its type."""
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: example(props[name]) for name in schema.get("required", [])}
    return {"string": "example", "integer": 1, "number": 1.0, "boolean": True, "array": []}.get(str(kind))


def _as_stream(answer: dict[str, Any]) -> str:
    """A completion as OpenAI's streamed chunks: the message, then the usage, then [DONE]."""
    choice = answer["choices"][0]
    delta = dict(choice["message"])
    for index, call in enumerate(delta.get("tool_calls") or []):
        call["index"] = index
    head = {key: answer[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [
        head | {"choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}]},
        head | {"choices": [], "usage": answer["usage"]},
    ]
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"


class _handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = reply(body)
        data = (_as_stream(answer) if body.get("stream") else json.dumps(answer)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if body.get("stream") else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


# --- running a document ----------------------------------------------------------------------


def run_document(path: Path) -> int:
    """Run the document's blocks; the number run."""
    blocks = snippets(path.read_text())
    namespace: dict[str, Any] = {"__name__": "__main__"}
    started: list[tuple[Snippet, subprocess.Popen[str]]] = []
    try:
        for block in blocks:
            print(f"--- {path.name}:{block.line}", flush=True)
            if block.file_name:
                Path(block.file_name).write_text(block.code)
                started.append((block, subprocess.Popen([sys.executable, block.file_name, *block.args], text=True)))
                continue
            code = compile(block.code, f"{path.name}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, namespace)  # noqa: S307 (running the document is the point)
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        for block, process in started:
            code = process.wait(timeout=180)
            assert code == 0, f"{path.name}:{block.line}: python {block.file_name} exited {code}"
    finally:
        for _, process in started:
            process.kill()
    return len(blocks)


def main() -> None:
    model = ObedientModel()
    os.environ.update(OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="sk-docs", MY_GATEWAY_KEY="gw-docs")
    count = run_document(Path(sys.argv[1]).resolve())
    print(f"ran {count} python blocks", flush=True)
    os._exit(0)  # DBOS's threads, if a snippet launched it, must not keep a finished reader waiting


if __name__ == "__main__":
    main()
