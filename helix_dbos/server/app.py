"""``create_app``: the agent server as an ASGI app (Starlette), to run on its own or to
mount in your FastAPI or Starlette app::

    from fastapi import FastAPI
    from helix_dbos.server import create_app

    app = FastAPI()
    app.mount("/agents", create_app(executor, authenticate=authenticate))

Every route passes ``authenticate`` first (see ``server/auth.py``); errors are JSON with
the status that says what went wrong (``server/problems.py``). The operator console is
at ``/console`` (``server/console``).
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount

from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos.errors import ConfigurationError, HelixError
from helix_dbos.agents import AgentConfig
from helix_dbos.server.auth import Authenticate, AuthMiddleware
from helix_dbos.server.chat import CHAT_ROUTES
from helix_dbos.server.console import create_console
from helix_dbos.server.problems import on_helix_error, on_validation_error
from helix_dbos.server.routes import ROUTES

SSE_KEEPALIVE_SECONDS = 15.0


def create_app(
    executor: DBOSAgentExecutor,
    *,
    authenticate: Authenticate | None = None,
    allow_unauthenticated: bool = False,
    console: bool = True,
    console_secret: bytes | None = None,
    sse_keepalive: float = SSE_KEEPALIVE_SECONDS,
    chat_agent: AgentConfig | str | None = None,
) -> Starlette:
    """The agent server for ``executor``'s agents.

    Fail-closed: raises :class:`ConfigurationError` unless ``authenticate`` is given or
    ``allow_unauthenticated=True`` says on purpose that anyone may call it.
    With ``console`` the operator console is mounted at ``/console`` behind the same
    authentication (``server/console``); ``console_secret`` signs its CSRF tokens (give
    every process of a deployment the same one; default: random per process).
    ``sse_keepalive`` is the seconds between keep-alive comments of a quiet ``/sse`` (and
    chat stream). ``chat_agent`` runs new chats whose request names no ``agent``
    (``server/chat.py``: the AI SDK's ``useChat`` routes under ``/chat``).
    """
    if authenticate is None and not allow_unauthenticated:
        raise ConfigurationError(
            "create_app needs authenticate=<hook>, or allow_unauthenticated=True to serve without authentication"
        )
    routes: list[BaseRoute] = [*ROUTES, *CHAT_ROUTES]
    if console:
        routes.append(Mount("/console", app=create_console(executor, console_secret)))
    app = Starlette(
        routes=routes,
        middleware=[Middleware(AuthMiddleware, authenticate=authenticate)],
        exception_handlers={HelixError: on_helix_error, ValidationError: on_validation_error},
    )
    app.state.executor = executor
    app.state.sse_keepalive = sse_keepalive
    app.state.chat_agent = chat_agent.name if isinstance(chat_agent, AgentConfig) else chat_agent
    return app
