"""Who may do what to which session: the agent server's ``authorize`` policy.

Every session has an owner (``SessionRecord.owner``): the server makes the principal that
created a session through any route (``/start``, ``/chat``) its owner, and a sub-agent's
session takes its root's. Before a route reads or changes a session it asks::

    authorize(principal, action, session) -> bool      # sync or async

with one of the :data:`Action` values. ``action="operate"`` comes with ``session=None``:
may the principal see every session in the lists, the inbox and the workers page (else
it sees its own)? The default, :func:`owns`, lets a principal act on the sessions it owns
and nothing else. A policy where administrators see and answer everything::

    def authorize(principal: User, action: Action, session: SessionRecord | None) -> bool:
        return principal.is_admin or owns(principal, action, session)

    app = create_app(executor, authenticate=authenticate, authorize=authorize)

A session the principal may not act on answers exactly as one that does not exist (404
``session_not_found``), so ids of other people's sessions cannot be probed. A principal's
owner string is ``str(principal)``: return a stable user id from ``authenticate`` (or an
object whose ``str()`` is one).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from starlette.requests import Request

from helix_dbos._client.live import LiveStreams
from helix_dbos._store.records import SessionRecord
from helix_dbos._text import require_storable
from helix_dbos.errors import SessionNotFoundError

Action = Literal["read", "write", "answer", "stop", "operate"]
"""What a route does to a session:

- ``read``: its status, transcript, state, stream (``/status``, ``/sessions/{id}``,
  ``/sse``, ``GET /chat/{id}/stream``, the console's session page);
- ``write``: a new turn or a resume of it (``/start``, ``/resume``, ``POST /chat``);
- ``answer``: answer its pending calls (``/submit-tool-result``, a chat's answers, the
  console's answer forms);
- ``stop``: interrupt or abort it (``/interrupt``, ``/abort``, ``/chat/{id}/stop``, ...);
- ``operate`` (with no session): see every session in lists, the inbox and the workers page.
"""

Authorize = Callable[[Any, Action, SessionRecord | None], bool | Awaitable[bool]]
"""``authorize(principal, action, session) -> bool`` (sync or async)."""

NOBODY: Final = False
"""What :meth:`Access.list_owner` answers when the principal may list no session."""


def owner_of(principal: Any) -> str | None:
    """The owner string of a principal (None for no principal)."""
    return None if principal is None else str(principal)


def owns(principal: Any, action: Action, session: SessionRecord | None) -> bool:
    """The default policy: a principal acts on the sessions it owns, and on nothing else
    (a session without an owner belongs to nobody here).

    Args:
        principal: Who is calling, as ``authenticate`` returned it (compared as ``str``).
        action: What the route does to the session (not consulted).
        session: The session, or None for a route that names none.

    Returns:
        True when the session's owner is the principal.
    """
    return session is not None and session.owner is not None and session.owner == owner_of(principal)


def allow_all(principal: Any, action: Action, session: SessionRecord | None) -> bool:
    """The policy of a server without authentication (``allow_unauthenticated=True``)."""
    return True


class Access:
    """``authorize`` applied to a request: the routes' one way to a session."""

    def __init__(self, authorize: Authorize) -> None:
        self.authorize = authorize

    async def allows(self, request: Request, action: Action, session: SessionRecord | None) -> bool:
        allowed = self.authorize(principal(request), action, session)
        if inspect.isawaitable(allowed):
            allowed = await allowed
        return bool(allowed)

    async def session(self, request: Request, live: LiveStreams, session_id: str, action: Action) -> SessionRecord:
        """The session, when it exists and the principal may ``action`` it; else
        :class:`SessionNotFoundError`, the same for both."""
        found = await self.find(request, live, session_id, action)
        if found is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        return found

    async def find(self, request: Request, live: LiveStreams, session_id: str, action: Action) -> SessionRecord | None:
        """:meth:`session`, with None for a session that is not there for the principal."""
        require_storable("session_id", session_id)
        found = await live.session_row(session_id)
        if found is None or not await self.allows(request, action, found):
            return None
        return found

    async def list_owner(self, request: Request) -> str | None | Literal[False]:
        """Whose sessions the principal's lists show: None for everyone's (``operate``),
        its own owner string, or :data:`NOBODY`."""
        if await self.allows(request, "operate", None):
            return None
        owner = owner_of(principal(request))
        return owner if owner else NOBODY


def principal(request: Request) -> Any:
    """Who is calling, as ``authenticate`` returned it (None on an open server)."""
    return getattr(request.state, "principal", None)


def access(request: Request) -> Access:
    return request.app.state.access  # type: ignore[no-any-return]
