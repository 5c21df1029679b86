"""Every exception helix-dbos raises to its callers, in one tree under :class:`HelixError`.

Every error a user can cause has its own class and a message that says what to do, so
the CLI prints one clear line instead of a traceback::

    HelixError
    ├── DatabaseError               the database cannot be resolved, reached or migrated
    │   ├── SchemaOutdatedError     the helix schema is older than this library: run `helix-dbos migrate`
    │   └── DatabaseUnavailableError  connections kept failing through every retry of a call
    ├── ConfigurationError          DBOS and helix are set up in a way that cannot work
    │   └── ExecutorIdInUseError    another live process holds this DBOS executor id's lease
    ├── AgentDefinitionError        an agent or tool definition is invalid (also a ValueError)
    ├── ToolInputError              a tool call's arguments do not validate (also a ValueError)
    ├── AgentNotRegisteredError     a run names an agent this process never registered
    ├── SessionNotFoundError        no session with that id
    ├── SessionBusyError            the session already has a run in progress
    ├── ToolCallNotPendingError     the call is unknown, answered, timed out or of another kind
    ├── InvalidToolResultError      a client result does not match the tool's output schema
    ├── UnstorableTextError         caller-given text holds NUL or a lone surrogate
    ├── ReadOnlyStateError          ctx.update_state where the state cannot change (an approval predicate)
    └── WorkflowContextError        called where DBOS cannot record it (inside a step)

The state layer's ``StateError`` and the LLM layer's ``LLMError`` are HelixErrors too.
This module imports nothing from helix_dbos, so every layer may raise these.
"""

from __future__ import annotations


class HelixError(Exception):
    """Base class of every helix-dbos error."""


class DatabaseError(HelixError):
    """The database could not be resolved, started, reached or migrated."""


class SchemaOutdatedError(DatabaseError):
    """The database's helix schema is missing or older than this library expects."""


class DatabaseUnavailableError(DatabaseError):
    """Connections to the database kept failing (killed, refused, the server restarting)
    through every retry of a call; the message says what the call was doing.

    An answer is then recorded with its delivery or not at all: send it again (a recorded
    one comes back ``already_answered``). A start may have started its run: look at the
    session before starting another."""


class ConfigurationError(HelixError):
    """DBOS and helix are configured in a way that cannot work (say which, and how to fix it)."""


class ExecutorIdInUseError(ConfigurationError):
    """Another live process holds the worker lease of this DBOS executor id: give each
    process its own id."""


class AgentDefinitionError(HelixError, ValueError):
    """An agent or tool definition is invalid; raised when it is defined, never mid-run."""


class ToolInputError(HelixError, ValueError):
    """A tool call's arguments do not validate against the tool's input schema.

    The message lists every problem with its field path; the runtime sends it back as the
    tool's error result, so the model can fix its call. ``validation_error`` is pydantic's.

    Args:
        message: Every problem, with its field path.
        tool_name: The tool's name.
        validation_error: Pydantic's error.
    """

    def __init__(self, message: str, tool_name: str, validation_error: Exception) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.validation_error = validation_error


class ToolCallLostError(HelixError):
    """A run's tool call was in flight each time the run lost its worker, as many times as
    its agent's ``max_worker_losses``: the run ends ``failed`` rather than running the
    call on one more worker (a tool that kills or freezes its process would take them all)."""


class AgentNotRegisteredError(HelixError):
    """A workflow referred to an agent name this process never registered."""


class SessionNotFoundError(HelixError):
    """No session with that id exists."""


class SessionBusyError(HelixError):
    """The session already has a run in progress."""


class ToolCallNotPendingError(HelixError):
    """The tool call id is unknown, already answered, timed out, or of another kind."""


class InvalidToolResultError(HelixError):
    """A client tool's result does not match the tool's output schema."""


class ReadOnlyStateError(HelixError):
    """``ctx.update_state`` where the state cannot change: in a ``require_approval``
    predicate, ``on_agent_suspended`` or ``on_agent_resumed``; the message says why."""


class WorkflowContextError(HelixError):
    """Called from a DBOS step, where starting or awaiting a durable run cannot be recorded."""


class UnstorableTextError(HelixError):
    """Caller-given text holds a character Postgres cannot store (NUL, a lone surrogate);
    refused before anything is written.

    ``field`` names the argument, ``path`` the place inside it (``""``: the argument
    itself), ``position`` the character's index in that string.

    Args:
        message: What was refused, and why.
        field: The argument's name.
        path: The place inside it; ``""`` for the argument itself.
        position: The character's index in that string.
    """

    def __init__(self, message: str, *, field: str, path: str = "", position: int = 0) -> None:
        super().__init__(message)
        self.field = field
        self.path = path
        self.position = position


class InvalidLastEventIdError(HelixError, ValueError):
    """An SSE ``Last-Event-ID`` that is not an event's ``seq`` (a whole number ≥ 0)."""


class MemoryInputError(HelixError, ValueError):
    """A memory call's input is not acceptable (a namespace, text, key, metadata, limit or
    mode out of bounds); refused before anything is stored or searched."""


class VectorSearchUnavailableError(HelixError):
    """A vector search, or an embedding space, was asked for where there is none: the
    database has no pgvector (text-only memory), no embedding space is active, or no
    embedder is configured to embed the query."""


class EmbeddingError(HelixError):
    """The embedding provider failed or answered something that is not the vectors asked for."""
