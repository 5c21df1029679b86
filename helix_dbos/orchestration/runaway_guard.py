"""The runaway guard: a tool that errors on three consecutive steps stops the
loop regardless of ``max_steps``; one success resets that tool's counter::

    >>> from helix_dbos.types import ToolResultMessage
    >>> failed = ToolResultMessage(
    ...     tool_call_id="t", tool_name="fetch", content="boom", is_error=True)
    >>> guard = RunawayGuard()
    >>> [guard.record_step([failed]) for _ in range(3)]
    [None, None, 'fetch']

The guard is a pydantic model, so the runtime can carry it through a DBOS workflow (or
rebuild it by replaying the steps' tool results).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.types import ToolResultMessage

MAX_SAME_TOOL_ERRORS = 3
"""Consecutive steps on which one tool may fail before the loop stops (:class:`RunawayGuard`)."""


class RunawayGuard(BaseModel):
    """Counts, per tool, the consecutive steps on which it failed.

    Counting is per step: several failing calls of one tool in the same step count once.
    A step in which the tool succeeded at least once resets its counter; a step that does
    not call the tool leaves the counter as it is.

    Attributes:
        max_same_tool_errors: Consecutive failing steps of one tool that stop the loop.
        error_counts: The consecutive failing steps so far, by tool name.
    """

    model_config = ConfigDict(extra="forbid")

    max_same_tool_errors: int = MAX_SAME_TOOL_ERRORS
    error_counts: dict[str, int] = Field(default_factory=dict)

    def record_step(self, results: Iterable[ToolResultMessage]) -> str | None:
        """Record one step's tool results; return the name of a tool that has now failed
        on ``max_same_tool_errors`` consecutive steps (stop the loop), else ``None``.

        Args:
            results: The step's tool result messages.

        Returns:
            The tool's name, or None.
        """
        failed: set[str] = set()
        succeeded: set[str] = set()
        for result in results:
            (failed if result.is_error else succeeded).add(result.tool_name)
        for name in succeeded:
            self.error_counts.pop(name, None)
        tripped = None
        for name in sorted(failed - succeeded):
            self.error_counts[name] = self.error_counts.get(name, 0) + 1
            if tripped is None and self.error_counts[name] >= self.max_same_tool_errors:
                tripped = name
        return tripped
