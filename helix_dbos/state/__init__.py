"""State tracking: drafts in, step writes and RFC 6902 patches out.

Tools change agent state through a draft; the tracker records what changed as step
writes (one op per top-level key: ``append``, ``replace``, ``delete``), which the
runtime persists, merges across parallel tools and streams as RFC 6902 patches::

    >>> tracker = StateTracker({"notes": []}, array_delta_mode=True)
    >>> tracker.update(lambda draft: draft.notes.append("a")).dump()
    {'notes': ['a']}
    >>> step_writes_to_rfc6902(tracker.get_step_writes())
    [{'op': 'add', 'path': '/notes/-', 'value': 'a'}]

Nothing here does I/O or imports DBOS or the database.
"""

from helix_dbos.state.draft import DictDraft, ListDraft
from helix_dbos.state.errors import StateError, StateValidationError
from helix_dbos.state.merge import merge_step_writes
from helix_dbos.state.rfc6902 import JsonPatchOperation, apply_rfc6902, step_writes_to_rfc6902
from helix_dbos.state.tracker import StateTracker
from helix_dbos.state.views import StateDict, StateList
from helix_dbos.state.writes import (
    AppendWrite,
    DeleteWrite,
    ReplaceWrite,
    StepWrite,
    StepWrites,
    apply_step_writes,
)

__all__ = [
    "AppendWrite",
    "DeleteWrite",
    "DictDraft",
    "JsonPatchOperation",
    "ListDraft",
    "ReplaceWrite",
    "StateDict",
    "StateError",
    "StateList",
    "StateTracker",
    "StateValidationError",
    "StepWrite",
    "StepWrites",
    "apply_rfc6902",
    "apply_step_writes",
    "merge_step_writes",
    "step_writes_to_rfc6902",
]
