"""Exceptions that helix-dbos raises to its callers.

Every error a user can cause has its own class and a message that says what to do,
so the CLI can print one clear line instead of a traceback.
"""

from __future__ import annotations


class HelixError(Exception):
    """Base class of every helix-dbos error."""


class DatabaseError(HelixError):
    """The database could not be resolved, started, reached or migrated."""


class SessionNotFoundError(HelixError):
    """No session with that id exists."""


class SessionBusyError(HelixError):
    """The session already has a run in progress."""


class ToolCallNotPendingError(HelixError):
    """The tool call id is unknown, already answered, or of another kind."""


class AgentNotRegisteredError(HelixError):
    """A workflow referred to an agent name this process never registered."""
