"""Errors raised by the state layer.

Every error that concerns one place in the state names it as a JSON pointer::

    >>> error = StateError("set is not JSON-serializable", ("user", "tags"))
    >>> error.path, str(error)
    ('/user/tags', 'set is not JSON-serializable at /user/tags')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helix_dbos.errors import HelixError
from helix_dbos.state.pointer import to_pointer


class StateError(HelixError):
    """A state change was refused: a non-JSON value, a bad write, a misused draft.

    ``path`` is the JSON pointer of the offending location (``""`` when none applies);
    ``path_parts`` holds the same location as a tuple of keys and indices.

    Args:
        message: What was refused.
        path_parts: The offending location as keys and indices; empty when none applies.
    """

    def __init__(self, message: str, path_parts: Sequence[str | int] = ()) -> None:
        self.message = message
        self.path_parts = tuple(path_parts)
        super().__init__(message, self.path_parts)

    @property
    def path(self) -> str:
        """The JSON pointer of the offending location (``""`` when none applies)."""
        return to_pointer(self.path_parts)

    def __str__(self) -> str:
        return f"{self.message} at {self.path}" if self.path_parts else self.message

    def under(self, prefix: Sequence[str | int]) -> StateError:
        """The same error, located below ``prefix`` (the draft path a value was assigned at).

        Args:
            prefix: The keys and indices of the draft path.

        Returns:
            A new error of the same class.
        """
        return StateError(self.message, (*prefix, *self.path_parts))


class StateValidationError(StateError):
    """An update (or the initial state) does not validate against the tracker's schema.

    ``errors`` holds pydantic's structured error list.

    Args:
        message: What does not validate.
        errors: Pydantic's structured error list.
    """

    def __init__(self, message: str, errors: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)
