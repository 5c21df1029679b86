"""The operator console: server-rendered pages on the agent server, at ``/console``.

    app = create_app(executor, authenticate=authenticate)      # the console is mounted at /console
    app = create_app(executor, authenticate=..., console=False) # without it

An inbox of pending approvals and client-tool calls (approve, deny with a reason, submit a
result), the sessions list, and a session's page (status, result, usage, its pending calls
and the answers they received, who answered when and why, a live tail of log lines, the
sub-agent tree, transcript, state, runs, interrupt / abort / resume). The inbox and a
session's page update in place from their live streams, with no reload. It uses the
server's authentication (every request passes ``authenticate`` first) and its
``authorize`` policy (a principal sees the sessions, calls and answers it may read, and
the whole inbox, every session and the workers page only when it may ``operate``), and
protects every
form against CSRF (``csrf.py``). ``secret`` signs the CSRF tokens: give every process of
a deployment the same one (default: random per process).
"""

from __future__ import annotations

import secrets as _secrets

from starlette.applications import Starlette
from starlette.routing import Route

from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos.errors import HelixError
from helix_dbos.server.access import Access
from helix_dbos.server.console import memory_page, pages
from helix_dbos.server.console.csrf import CsrfGuard, CsrfRejected
from helix_dbos.server.problems import on_helix_error


def create_console(executor: DBOSAgentExecutor, secret: bytes | None, access: Access) -> Starlette:
    app = Starlette(
        routes=[
            Route("/", pages.inbox, name="inbox"),
            Route("/inbox/events", pages.inbox_events, name="inbox_events"),
            Route("/sessions", pages.sessions, name="sessions"),
            Route("/workers", pages.workers, name="workers"),
            Route("/memory", memory_page.memory, name="memory"),
            Route("/sessions/{session_id:path}", pages.session, name="session"),
            Route("/events/{session_id:path}", pages.events, name="events"),
            Route("/answer", pages.answer, methods=["POST"], name="answer"),
            Route("/control", pages.control, methods=["POST"], name="control"),
        ],
        exception_handlers={CsrfRejected: pages.on_csrf_rejected, HelixError: on_helix_error},
    )
    app.state.executor = executor
    app.state.access = access
    app.state.csrf = CsrfGuard(secret or _secrets.token_bytes(32))
    return app


__all__ = ["create_console"]
