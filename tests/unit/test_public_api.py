"""The public namespace: ``__all__`` is exactly what ``helix_dbos`` exports, and every
name resolves; the exception tree has one root; the operator API is ``helix_dbos.admin``."""

from __future__ import annotations

import inspect

import helix_dbos
from helix_dbos import errors


def test_all_and_the_exports_agree() -> None:
    assert helix_dbos.__all__ == sorted([*helix_dbos._EXPORTS, "admin"])  # and the operator API's module
    assert dir(helix_dbos) == helix_dbos.__all__
    for name in helix_dbos.__all__:
        assert getattr(helix_dbos, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        helix_dbos.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("helix_dbos.no_such_name resolved")


def test_every_exported_error_is_a_helix_error() -> None:
    exported = [getattr(helix_dbos, n) for n in helix_dbos.__all__ if n.endswith("Error")]
    assert exported, "no errors exported"
    for cls in exported:
        assert issubclass(cls, helix_dbos.HelixError), cls
    defined = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert {c.__name__ for c in defined} <= set(helix_dbos.__all__)


def test_the_state_and_llm_errors_are_helix_errors_too() -> None:
    from helix_dbos.llm import LLMError
    from helix_dbos.state import StateError

    assert issubclass(StateError, helix_dbos.HelixError)
    assert issubclass(LLMError, helix_dbos.HelixError)


def test_the_operator_api_is_importable_from_the_top() -> None:
    from helix_dbos import admin
    from helix_dbos.client import admin as client_admin

    assert admin.__all__ == client_admin.__all__ and admin.list_pending is client_admin.list_pending
