"""The usage examples in the pure modules' docstrings run and stay true."""

import doctest
import importlib

import pytest

MODULES = [
    "helix_dbos.orchestration.finish",
    "helix_dbos.orchestration.finish_with",
    "helix_dbos.orchestration.messages",
    "helix_dbos.orchestration.plans",
    "helix_dbos.orchestration.prompts",
    "helix_dbos.orchestration.runaway_guard",
    "helix_dbos.orchestration.step_processing",
    "helix_dbos.orchestration.stop_conditions",
    "helix_dbos.orchestration.stopping",
    "helix_dbos.orchestration.validation",
]


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    results = doctest.testmod(importlib.import_module(module_name))

    assert results.attempted > 0
    assert results.failed == 0
