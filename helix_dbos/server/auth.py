"""Who may call the server: the ``authenticate`` hook, applied to every route.

Authentication fails closed: :func:`~helix_dbos.server.create_app` refuses to build
without a hook unless told ``allow_unauthenticated=True``. The hook gets the request and
returns who is calling (any object; its ``str()`` names an approver), ``None`` for "not
authenticated" (401), or raises :class:`Forbidden` (403)::

    def authenticate(request: Request) -> str | None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        return USERS.get(token)            # None: 401

The principal is put in ``request.state.principal`` for the routes (and the console).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from helix_dbos.errors import HelixError
from helix_dbos.server.problems import problem

Authenticate = Callable[[Request], Any | Awaitable[Any]]
"""``authenticate(request) -> principal | None`` (sync or async); may raise :class:`Forbidden`."""


class Forbidden(HelixError):
    """Raised by an ``authenticate`` hook: the caller is known and not allowed (HTTP 403)."""


class AuthMiddleware:
    """ASGI middleware: every HTTP request passes ``authenticate`` or gets 401/403."""

    def __init__(self, app: ASGIApp, authenticate: Authenticate | None) -> None:
        self.app = app
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal = None
        if self.authenticate is not None:
            try:
                principal = self.authenticate(Request(scope, receive))
                if inspect.isawaitable(principal):
                    principal = await principal
            except Forbidden as exc:
                await problem(403, "forbidden", str(exc) or "not allowed")(scope, receive, send)
                return
            if principal is None:
                await problem(401, "unauthenticated", "authentication required")(scope, receive, send)
                return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)
