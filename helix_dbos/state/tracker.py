"""StateTracker: draft mutations in, step writes and RFC 6902 patches out.

::

    >>> tracker = StateTracker({"notes": [], "count": 0}, array_delta_mode=True)
    >>> def add_note(draft):
    ...     draft.notes.append({"content": "Note 1"})
    ...     draft.count += 1
    >>> tracker.update(add_note).count
    1
    >>> tracker.get_step_writes()  # doctest: +NORMALIZE_WHITESPACE
    [{'op': 'append', 'path': ['notes'], 'values': [{'content': 'Note 1'}]},
     {'op': 'replace', 'path': ['count'], 'value': 1}]
    >>> tracker.get_rfc6902_patches()  # doctest: +NORMALIZE_WHITESPACE
    [{'op': 'add', 'path': '/notes/-', 'value': {'content': 'Note 1'}},
     {'op': 'replace', 'path': '/count', 'value': 1}]
    >>> tracker.reset_tracking()
    >>> tracker.get_step_writes()
    []

Every update is all-or-nothing: if ``fn`` raises, assigns a non-JSON value or leaves
the state invalid for ``schema``, nothing of it is kept. Updates cost what they touch:
the state is held as immutable nodes with structural sharing, writes copy only the
containers on their path, appends copy nothing, and :meth:`get_state` is a free
read-only snapshot. Validation against ``schema`` is the exception: it checks the
whole state after each update, and the initial state unless that is a snapshot already
found to match ``schema`` (one from a tracker with the same ``schema``, or one another
tracker checked: the trackers of a step's parallel tools check their shared start once). A tracker is not thread-safe; trackers may share state
(``StateTracker(other.get_state())`` shares it without copying) across threads.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from helix_dbos.state.diff import compute_step_writes
from helix_dbos.state.draft import DictDraft, DraftSession
from helix_dbos.state.errors import StateError, StateValidationError
from helix_dbos.state.nodes import AppendedList
from helix_dbos.state.rfc6902 import JsonPatchOperation, step_writes_to_rfc6902
from helix_dbos.state.values import to_node
from helix_dbos.state.views import StateDict
from helix_dbos.state.writes import StepWrites
from helix_dbos._text import find_unstorable, storable


class StateTracker:
    """Tracks one agent state: apply draft mutations, report what changed since the last reset.

    ``initial_state`` is a JSON object: a dict, a pydantic model instance (dumped in JSON
    mode) or a view from :meth:`get_state` (shared, not copied); a dict is copied.
    ``array_delta_mode`` makes in-place appends ``append`` writes (``add /x/-`` patches)
    that compose with parallel tools; otherwise any array change replaces the array.
    ``schema`` (a pydantic model class) must accept the state after every update.

    Args:
        initial_state: A dict, a pydantic model instance or a :class:`StateDict`.
        array_delta_mode: Record in-place appends as ``append`` writes.
        schema: A pydantic model class the state must match after every update.

    Raises:
        StateError: ``initial_state`` is not a JSON object.
        StateValidationError: ``initial_state`` does not match ``schema``.
    """

    def __init__(
        self,
        initial_state: Mapping[str, Any] | BaseModel | StateDict,
        array_delta_mode: bool = False,
        schema: type[BaseModel] | None = None,
    ) -> None:
        state = to_node(initial_state)
        if type(state) is not dict:
            raise StateError(f"the state must be a JSON object, not {type(initial_state).__name__}")
        self.array_delta_mode = array_delta_mode
        self.schema = schema
        if schema is not None and not _matches(initial_state, schema):
            _validate(schema, state)
            if isinstance(initial_state, StateDict):
                object.__setattr__(initial_state, "_matches", schema)
        self._state: dict[str, Any] = state
        self._base: dict[str, Any] = state
        self._updating = False

    def get_state(self) -> StateDict:
        """The current state as a read-only snapshot (``.dump()`` gives a mutable copy).

        Returns:
            The state.
        """
        return StateDict(self._state, self.schema)

    def update(self, fn: Callable[[DictDraft], object]) -> StateDict:
        """Run ``fn`` on a draft of the state and commit what it changed; returns the new state.

        ``fn`` must be synchronous; its return value is ignored. What ``fn`` raises is
        raised; the state is then unchanged, as it is after the errors below.

        Args:
            fn: Receives a draft of the state and changes it.

        Returns:
            The new state, read-only.

        Raises:
            StateError: ``fn`` stored a value that is not JSON.
            StateValidationError: The new state does not match the ``schema``.
        """
        if self._updating:
            raise StateError("update() cannot run inside another update() of the same tracker")
        self._updating = True
        session = DraftSession(owner=self)
        try:
            new_state = self._run(fn, DictDraft(self._state, session))
        finally:
            session.active = False
            self._updating = False
        self._state = new_state
        return self.get_state()

    def _run(self, fn: Callable[[DictDraft], object], draft: DictDraft) -> dict[str, Any]:
        result = fn(draft)
        if inspect.iscoroutine(result):
            result.close()
            raise StateError("update() needs a synchronous function; this one returned a coroutine")
        new_state = draft._finalize()
        if self.schema is not None and new_state is not self._state:
            _validate(self.schema, new_state)
        return new_state

    def get_step_writes(self) -> StepWrites:
        """The changes since the last reset as step writes (fresh plain data, one op per key).

        Returns:
            The step writes.
        """
        return compute_step_writes(self._base, self._state, self.array_delta_mode)

    def get_rfc6902_patches(self) -> list[JsonPatchOperation]:
        """The changes since the last reset as RFC 6902 patches, derived from the step writes.

        Returns:
            The RFC 6902 operations.
        """
        return step_writes_to_rfc6902(self.get_step_writes())

    def reset_tracking(self) -> None:
        """Forget the changes so far: later writes and patches start from the current state."""
        self._base = self._state


def _matches(initial_state: object, schema: type[BaseModel]) -> bool:
    """Whether ``initial_state`` is a snapshot already found to match ``schema``."""
    return isinstance(initial_state, StateDict) and initial_state._matches is schema


def _validate(schema: type[BaseModel], state: dict[str, Any]) -> None:
    """Check ``state`` against ``schema`` as JSON, as it will be stored: a lone surrogate
    (which JSON cannot carry, and helix_dbos._text replaces when the step is recorded) is
    validated as U+FFFD."""
    try:
        try:
            schema.model_validate_json(json.dumps(state, default=_encode_node))
        except ValidationError:
            if find_unstorable(state) is None:
                raise
            schema.model_validate_json(json.dumps(storable(state), default=_encode_node))
    except ValidationError as error:
        raise StateValidationError(
            f"state does not match {schema.__name__}: {error}", error.errors(include_url=False)
        ) from error


def _encode_node(value: Any) -> list[Any]:
    if isinstance(value, AppendedList):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not a state node")
