"""The examples in the state modules' docstrings run and say what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import helix_dbos.state

MODULES = ["helix_dbos.state"] + [
    f"helix_dbos.state.{info.name}" for info in pkgutil.iter_modules(helix_dbos.state.__path__)
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_state_layer_imports_no_runtime_dependencies() -> None:
    import ast
    import pathlib

    forbidden = {"dbos", "psycopg", "sqlalchemy", "litellm"}
    for path in pathlib.Path(helix_dbos.state.__path__[0]).glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not {name.split(".")[0] for name in names} & forbidden, path.name
