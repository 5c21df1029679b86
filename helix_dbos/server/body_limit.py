"""Bounded request bodies: an ASGI middleware that refuses a body larger than its limit
with a JSON 413, before more than the limit is read::

    {"error": "body_too_large", "message": "the request body is larger than 1048576 bytes", "max_bytes": 1048576}

A ``Content-Length`` above the limit is refused before the app runs; a body without one
(chunked) is counted as it arrives, and the read that passes the limit ends the request
with the 413 instead. :func:`~helix_dbos.server.create_app` puts it in front of every
route, the console's forms included (``max_body_bytes``, and ``max_chat_body_bytes`` for
``POST /chat``). What the client still sends after the 413 is read and dropped by the
server, so the client reads the answer instead of a reset connection.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from helix_dbos.server.problems import problem

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""1 MiB: the default limit of every route's request body."""


class BodyTooLarge(Exception):
    """Raised to the app by ``receive`` when the body passes its limit, once the 413 is
    sent (or, when the app had begun its answer, instead of one)."""


class BodyLimit:
    """ASGI middleware: request bodies of at most ``max_bytes`` (``per_path`` gives a
    route, by its path inside the app, a limit of its own)."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 per_path: Mapping[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.per_path = dict(per_path or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(_route_path(scope), self.max_bytes)
        announced = _content_length(scope)
        if announced is not None and announced > limit:
            await too_large(limit)(scope, receive, send)
            return
        body = _CountedBody(scope, receive, send, limit)
        try:
            await self.app(scope, body.receive, body.send)
        except BodyTooLarge:
            if not body.refused:
                raise


class _CountedBody:
    """One request's ``receive`` and ``send`` as the app gets them: ``receive`` counts the
    body and, past the limit, sends the 413 (unless the app's answer has begun) and
    raises :class:`BodyTooLarge`; ``send`` drops what the app sends after that."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        self.scope, self._receive, self._send, self.limit = scope, receive, send, limit
        self.read = 0
        self.started = self.refused = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.read += len(message.get("body", b""))
            if self.read > self.limit:
                if not self.started:
                    await too_large(self.limit)(self.scope, self._receive, self._send)
                    self.refused = True
                raise BodyTooLarge
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return  # the 413 is the answer, not an error page an app behind makes of BodyTooLarge
        self.started = self.started or message["type"] == "http.response.start"
        await self._send(message)


def too_large(limit: int) -> JSONResponse:
    return problem(413, "body_too_large", f"the request body is larger than {limit} bytes", max_bytes=limit)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _route_path(scope: Scope) -> str:
    """The request's path inside this app (without the prefix it is mounted under)."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path
