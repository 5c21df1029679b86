"""The console's Memory page (``/console/memory``), for a principal ``authorize`` lets
``operate``: the memory mode (vector or text-only), the embedding spaces, memories by
embedding status, every namespace with its pending and failed counts, and a search
(``?prefix=user/u-42&q=tea``, by text). Anyone else gets the page that does not exist."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from helix_dbos.errors import HelixError
from helix_dbos.memory import MemoryStore
from helix_dbos.server.access import access
from helix_dbos.server.console.pages import _executor, render

MAX_QUERY_CHARS = 500


async def memory(request: Request) -> Response:
    if not await access(request).allows(request, "operate", None):
        return render(request, "missing.html", status_code=404, message="no such page")
    prefix = request.query_params.get("prefix", "")[:MAX_QUERY_CHARS]
    query = request.query_params.get("q", "")[:MAX_QUERY_CHARS]
    store = MemoryStore(pool=_executor(request).pool)

    def read() -> dict[str, Any]:
        found: dict[str, Any] = {"status": store.status(), "namespaces": store.namespaces(), "hits": [], "error": None}
        if query.strip():
            try:
                namespace = tuple(prefix.split("/")) if prefix else ()
                found["hits"] = store.search(namespace, query, limit=20, mode="text")
            except HelixError as exc:
                found["error"] = str(exc)
        return found

    page = await run_in_threadpool(read)
    return render(request, "memory.html", status_code=422 if page["error"] else 200, prefix=prefix, query=query, **page)
