"""``create_app``: the agent server as an ASGI app (Starlette), to run on its own or to
mount in your FastAPI or Starlette app::

    from fastapi import FastAPI
    from helix_dbos.server import create_app

    app = FastAPI()
    app.mount("/agents", create_app(executor, authenticate=authenticate))

Every route passes ``authenticate`` first (see ``server/auth.py``), and acts on a
session only when ``authorize`` allows it (``server/access.py``); errors are JSON with
the status that says what went wrong (``server/problems.py``). The operator console is
at ``/console`` (``server/console``). Request bodies are bounded (``server/body_limit.py``)
and JSON bodies nest at most 64 levels (``server/json_body.py``).
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount

from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos.errors import ConfigurationError, HelixError
from helix_dbos.agents import AgentConfig
from helix_dbos.server.access import Access, Authorize, allow_all, owns
from helix_dbos.server.auth import Authenticate, AuthMiddleware
from helix_dbos.server.body_limit import DEFAULT_MAX_BODY_BYTES, BodyLimit
from helix_dbos.server.chat import CHAT_ROUTES
from helix_dbos.server.console import create_console
from helix_dbos.server.json_body import TooDeeplyNested, on_too_deeply_nested
from helix_dbos.server.problems import on_helix_error, on_validation_error
from helix_dbos.server.routes import ROUTES

SSE_KEEPALIVE_SECONDS = 15.0
DEFAULT_MAX_CHAT_BODY_BYTES = 4 * 1024 * 1024
"""4 MiB: ``useChat`` sends the chat's whole history with each message (the server reads
only the last one), so a long chat's request outgrows the other routes' 1 MiB."""


def create_app(
    executor: DBOSAgentExecutor,
    *,
    authenticate: Authenticate | None = None,
    authorize: Authorize | None = None,
    allow_unauthenticated: bool = False,
    console: bool = True,
    console_secret: bytes | None = None,
    sse_keepalive: float = SSE_KEEPALIVE_SECONDS,
    chat_agent: AgentConfig | str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_chat_body_bytes: int = DEFAULT_MAX_CHAT_BODY_BYTES,
) -> Starlette:
    """The agent server for ``executor``'s agents.

    Fail-closed: it refuses to build unless ``authenticate`` is given or
    ``allow_unauthenticated=True`` says on purpose that anyone may call it. ``authorize``
    decides who may do what to which session; the default lets a principal act only on
    the sessions it owns (:func:`~helix_dbos.server.owns`), and, on a server without
    ``authenticate``, lets anyone do anything.

    A request body larger than ``max_body_bytes`` (``max_chat_body_bytes`` for
    ``POST /chat``) is answered with 413 ``body_too_large`` before more than that is read,
    whether it announces its length or comes in chunks (the limit holds for what the
    routes, the console's forms and ``authenticate`` read). A JSON body nested deeper
    than 64 levels is answered with 422 ``too_deeply_nested``.

    Args:
        executor: The executor whose registered agents the server runs.
        authenticate: Who is calling: ``authenticate(request)`` returns a principal
            (None: 401), or raises :class:`~helix_dbos.server.Forbidden` (403).
        authorize: ``authorize(principal, action, session) -> bool``, sync or async.
        allow_unauthenticated: Serve without ``authenticate``, on purpose.
        console: Mount the operator console at ``/console``, behind the same
            authentication.
        console_secret: Signs the console's CSRF tokens; give every process of a
            deployment the same one (default: random per process).
        sse_keepalive: Seconds between keep-alive comments of a quiet ``/sse`` (and
            chat stream).
        chat_agent: The agent of new chats whose request names no ``agent`` (the AI
            SDK's ``useChat`` routes under ``/chat``).
        max_body_bytes: The largest request body, in bytes.
        max_chat_body_bytes: The largest ``POST /chat`` body, in bytes.

    Returns:
        The Starlette app: run it with uvicorn, or mount it in your own app.

    Raises:
        ConfigurationError: Neither ``authenticate`` nor ``allow_unauthenticated=True``
            is given.
    """
    if authenticate is None and not allow_unauthenticated:
        raise ConfigurationError(
            "create_app needs authenticate=<hook>, or allow_unauthenticated=True to serve without authentication"
        )
    policy = Access(authorize or (owns if authenticate is not None else allow_all))
    routes: list[BaseRoute] = [*ROUTES, *CHAT_ROUTES]
    if console:
        routes.append(Mount("/console", app=create_console(executor, console_secret, policy)))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(BodyLimit, max_bytes=max_body_bytes, per_path={"/chat": max_chat_body_bytes}),
            Middleware(AuthMiddleware, authenticate=authenticate),
        ],
        exception_handlers={
            HelixError: on_helix_error,
            ValidationError: on_validation_error,
            TooDeeplyNested: on_too_deeply_nested,
        },
    )
    app.state.executor = executor
    app.state.access = policy
    app.state.sse_keepalive = sse_keepalive
    app.state.chat_agent = chat_agent.name if isinstance(chat_agent, AgentConfig) else chat_agent
    return app
