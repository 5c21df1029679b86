"""Ready-made memory tools for an agent: ``remember``, ``recall`` and ``forget``::

    agent = define_agent(
        "assistant", ...,
        tools=[*memory_tools(namespace=owner_namespace("user"))],
    )

``namespace`` is a fixed namespace (``("team", "support")``), or a function of the tool's
context that returns one. :func:`owner_namespace` gives each session owner a namespace
of their own (``("user", <owner>)``), so one user's agent cannot read or change another's
memories; a session without an owner gets an error result, never a shared namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from helix_dbos._store.memory_records import MAX_KEY_CHARS, MAX_TEXT_CHARS, Namespace, check_namespace
from helix_dbos.errors import HelixError
from helix_dbos.tools import ApprovalPredicate, Tool, ToolContext, define_tool

NamespaceSource = Namespace | Callable[[ToolContext], Namespace]
"""A namespace, or ``fn(ctx) -> namespace`` evaluated in each call."""


def owner_namespace(*prefix: str) -> Callable[[ToolContext], Namespace]:
    """The namespace ``(*prefix, <the session's owner>)``; a session without an owner
    makes the call fail (the model sees the error).

    Args:
        *prefix: The namespace's parts before the owner, e.g. ``"user"``.

    Returns:
        ``fn(ctx) -> namespace``, for :func:`memory_tools`.
    """

    def namespace(ctx: ToolContext) -> Namespace:
        owner = ctx.memory.owner()
        if owner is None:
            raise HelixError("memory is per owner here, and this session has no owner")
        return (*prefix, owner)

    return namespace


class RememberInput(BaseModel):
    text: str = Field(description="The fact to remember, as a short sentence.", max_length=MAX_TEXT_CHARS)
    key: str | None = Field(
        default=None, max_length=MAX_KEY_CHARS,
        description="Optional: a stable name for the fact; remembering under the same key replaces it.",
    )


class RecallInput(BaseModel):
    query: str = Field(description="What to look for in memory.", max_length=MAX_TEXT_CHARS)
    limit: int | None = Field(default=None, ge=1, le=50, description="How many memories at most.")


class ForgetInput(BaseModel):
    key: str | None = Field(default=None, max_length=MAX_KEY_CHARS, description="The key of the memory to forget.")
    id: int | None = Field(default=None, description="The id of the memory to forget (as recall shows it).")


def memory_tools(
    namespace: NamespaceSource, *, forget_requires_approval: bool | ApprovalPredicate = False,
    limit: int = 5,
) -> list[Tool]:
    """The tools ``remember``, ``recall`` and ``forget`` over one namespace.

    Args:
        namespace: The namespace the tools read and write, or ``fn(ctx) -> namespace``
            (e.g. :func:`owner_namespace`).
        forget_requires_approval: Gate ``forget`` on a person's approval
            (``require_approval`` of the tool).
        limit: The default number of memories ``recall`` returns.

    Returns:
        The three tools, to put in an agent's ``tools``.
    """
    if not callable(namespace):
        namespace = check_namespace(namespace)

    def resolve(ctx: ToolContext) -> Namespace:
        return check_namespace(namespace(ctx) if callable(namespace) else namespace)

    def remember(input: RememberInput, ctx: ToolContext) -> dict[str, Any]:
        write = ctx.memory.remember(resolve(ctx), input.text, key=input.key)
        return {"remembered": input.text, "key": write.key}

    def recall(input: RecallInput, ctx: ToolContext) -> dict[str, Any]:
        hits = ctx.memory.search(resolve(ctx), input.query, limit=input.limit or limit)
        return {
            "memories": [
                {"id": h.memory.id, "text": h.memory.text, "key": h.memory.key} for h in hits
            ]
        }

    def forget(input: ForgetInput, ctx: ToolContext) -> dict[str, Any]:
        ctx.memory.forget(resolve(ctx), key=input.key, memory_id=input.id)
        return {"forgotten": input.key if input.key is not None else input.id}

    return [
        define_tool("remember", "Remember a fact for later conversations.", RememberInput, execute=remember),
        define_tool("recall", "Search what was remembered in earlier conversations.", RecallInput, execute=recall),
        define_tool(
            "forget", "Forget a remembered fact, by its key or id.", ForgetInput, execute=forget,
            require_approval=forget_requires_approval,
        ),
    ]
