"""Decide whether a step's finishWith tool calls complete the agent.

After a step's tools have run, the runtime describes each call, in tool-call order, as a
:class:`ToolCallOutcome` (``Tool.outcome(...)`` builds one) and asks
:func:`resolve_finish_with`:

- the first finishWith call (by call order) that succeeded wins; later ones are ignored;
- its ``transform`` (the tool's ``finish_with_transform``) maps the tool output to the
  agent output; if the transform raises, the agent FAILS;
- a finishWith call whose execute raised (or whose input was invalid, or that was denied)
  does not complete the agent: its error already went to the model as a tool result,
  so the loop continues and the model can try again.

::

    >>> outcomes = [
    ...     ToolCallOutcome("t1", "approve", finish_with=True, output={"status": "approved"}),
    ...     ToolCallOutcome("t2", "reject", finish_with=True, output={"status": "rejected"}),
    ... ]
    >>> resolution = resolve_finish_with(outcomes)
    >>> resolution.status, resolution.output, resolution.tool_name
    ('completed', {'status': 'approved'}, 'approve')

The runtime then completes the agent (``completed``), fails it (``failed``, with
``error``) or runs another step (``continue``). Sub-agents dispatched in the same step
still run before completion is applied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .validation import conform_output, to_json_value

logger = logging.getLogger("helix_dbos")


@dataclass(frozen=True)
class ToolCallOutcome:
    """How one executed tool call ended.

    ``output`` is the tool's JSON output when it succeeded (``error is None``); ``error``
    is the error text sent to the model when it did not. ``transform`` maps a winning
    finishWith output to the agent output (``None``: the output is used as is).

    Attributes:
        tool_call_id: The call's id.
        tool_name: Its tool's name.
        finish_with: The tool is a finishWith tool.
        output: The JSON output, when the call succeeded.
        error: The error text, when it failed.
        transform: Maps a winning output to the agent's output, or None.
    """

    tool_call_id: str
    tool_name: str
    finish_with: bool = False
    output: Any = None
    error: str | None = None
    transform: Callable[[Any], Any] | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None


class FinishWithResolution(BaseModel):
    """``continue`` (no finishWith call succeeded), ``completed`` with ``output``, or
    ``failed`` with ``error`` (the winner's transform raised).

    Attributes:
        status: ``continue``, ``completed`` or ``failed``.
        output: The agent's output, when completed.
        error: The transform's error, when failed.
        tool_call_id: The winning call's id, or None.
        tool_name: The winning call's tool, or None.
    """

    model_config = ConfigDict(extra="forbid")

    status: Literal["continue", "completed", "failed"]
    output: Any = None
    error: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None


def resolve_finish_with(
    outcomes: Sequence[ToolCallOutcome], output_schema: type[BaseModel] | None = None
) -> FinishWithResolution:
    """Resolve a step's outcomes (in tool-call order) into completion, failure or neither.

    With ``output_schema``, the winning output is validated against the agent's output
    schema; output that does not conform is passed through with a warning,
    since the tool's side effects have already happened.

    Args:
        outcomes: How each executed call of the step ended, in tool-call order.
        output_schema: The agent's output schema, or None.

    Returns:
        ``continue``, ``completed`` with the output, or ``failed`` with the error.
    """
    winner = next((o for o in outcomes if o.finish_with and o.succeeded), None)
    if winner is None:
        return FinishWithResolution(status="continue")
    try:
        output = winner.transform(winner.output) if winner.transform else winner.output
        output = to_json_value(output)
    except Exception as error:  # user code: a raising (or non-JSON) transform fails the agent
        message = f"finish_with_transform of tool '{winner.tool_name}' raised: {error}"
        logger.error(message)
        return FinishWithResolution(
            status="failed",
            error=message,
            tool_call_id=winner.tool_call_id,
            tool_name=winner.tool_name,
        )
    return FinishWithResolution(
        status="completed",
        output=conform_output(
            output, output_schema, source=f"finishWith tool '{winner.tool_name}'"
        ),
        tool_call_id=winner.tool_call_id,
        tool_name=winner.tool_name,
    )
