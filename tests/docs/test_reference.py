"""Every public function and method of the reference documents its parameters.

The API reference (docs/reference.md and docs/reference/*.md) is rendered by mkdocstrings
from Google-style docstrings: a parameter shows in its entry's table only when the
docstring lists it under ``Args:``. This test reads the package the way mkdocstrings
does (griffe, the same parser) and checks each public function, method and class of the
modules in :data:`REFERENCED_MODULES`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import griffe
import pytest

import helix_dbos

ROOT = Path(__file__).resolve().parents[2]

REFERENCED_MODULES = [
    "helix_dbos",  # the names of helix_dbos.__all__, wherever they are defined
    "helix_dbos.admin",
    "helix_dbos.agents",
    "helix_dbos.answers",
    "helix_dbos.companions",
    "helix_dbos.demo",
    "helix_dbos.errors",
    "helix_dbos.events",
    "helix_dbos.llm",
    "helix_dbos.mcp",
    "helix_dbos.memory",
    "helix_dbos.observability",
    "helix_dbos.orchestration",
    "helix_dbos.remote",
    "helix_dbos.server",
    "helix_dbos.sse",
    "helix_dbos.state",
    "helix_dbos.subagents",
    "helix_dbos.tools",
    "helix_dbos.toolsets",
    "helix_dbos.types",
]
"""The modules whose public API this test holds to the rule (extend it as modules join)."""

PARAMETER_SECTIONS = {"parameters", "other_parameters"}
FIELD_SECTIONS = PARAMETER_SECTIONS | {"attributes"}


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    return griffe.load("helix_dbos", search_paths=[str(ROOT)], docstring_parser="google", resolve_aliases=True,
                       resolve_external=False)


def public_names(module: griffe.Module) -> list[str]:
    """``__all__`` where the module has one, else the names it defines without a leading ``_``."""
    if module.path == "helix_dbos":
        return [name for name in helix_dbos.__all__ if name != "admin"]  # admin: a module of its own
    if module.exports is not None:
        return [str(name) for name in module.exports]
    return [name for name, member in module.members.items()
            if not name.startswith("_") and not member.is_alias and not member.is_module]


def documented(docstring: griffe.Docstring | None, sections: set[str]) -> set[str]:
    """The names a docstring lists in the given kinds of section (``*args`` as ``args``)."""
    if docstring is None:
        return set()
    return {item.name.lstrip("*") for section in docstring.parsed if section.kind.value in sections
            for item in section.value}


def parameters(function: griffe.Function) -> list[str]:
    return [p.name for p in function.parameters if p.name not in ("self", "cls")]


def is_tool(function: griffe.Function) -> bool:
    """A ``@tool`` function: its docstring is what the model reads, so it stays a description."""
    return any(str(decorator.value).split(".")[-1].split("(")[0] == "tool" for decorator in function.decorators)


def entries(package: griffe.Module) -> Iterator[griffe.Object]:
    """Each public class, function and method of the referenced modules, once."""
    seen: set[str] = set()
    for module_path in REFERENCED_MODULES:
        module = package if module_path == "helix_dbos" else package[module_path.removeprefix("helix_dbos.")]
        for name in public_names(module):
            target = module[name]
            target = target.final_target if target.is_alias else target
            if target.path in seen or not (target.is_class or target.is_function):
                continue
            seen.add(target.path)
            yield target
            if target.is_class:
                for member_name, member in target.members.items():
                    if member.is_alias or not member.is_function or "property" in member.labels:
                        continue
                    if member_name.startswith("_") and member_name != "__init__":
                        continue
                    if member.path not in seen:
                        seen.add(member.path)
                        yield member


def problems_of(entry: griffe.Object) -> list[str]:
    """What the entry's reference lacks: a docstring, or parameters under ``Args:``."""
    if entry.is_class:
        return [] if entry.docstring is not None else ["no docstring"]
    assert isinstance(entry, griffe.Function)
    if is_tool(entry):
        return []
    owner = entry.parent
    if entry.name == "__init__" and isinstance(owner, griffe.Class):
        if not entry.lineno:  # made by @dataclass: its fields, as Attributes or attribute docstrings
            known: set[str] = set()
            for cls in [owner, *owner.mro()]:
                known |= documented(cls.docstring, FIELD_SECTIONS)
                known |= {name for name, member in cls.members.items() if member.is_attribute and member.docstring}
            return [f"field {p!r} undocumented" for p in parameters(entry) if p not in known and not p.startswith("_")]
        listed = documented(entry.docstring, PARAMETER_SECTIONS) | documented(owner.docstring, PARAMETER_SECTIONS)
    else:
        if entry.docstring is None:
            return ["no docstring"]
        listed = documented(entry.docstring, PARAMETER_SECTIONS)
    names = parameters(entry)
    return [f"parameter {p!r} not under Args" for p in names if p not in listed] + [
        f"Args lists {p!r}, which is no parameter" for p in sorted(listed - set(names)) if entry.name != "__init__"
    ]


def test_the_referenced_modules_are_every_public_module() -> None:
    public = {f"helix_dbos.{p.stem}" for p in (ROOT / "helix_dbos").glob("[!_]*.py")} | {
        f"helix_dbos.{p.parent.name}" for p in (ROOT / "helix_dbos").glob("[!_]*/__init__.py")
    }
    assert public <= set(REFERENCED_MODULES)


def test_every_public_function_and_method_documents_its_parameters(package: griffe.Module) -> None:
    found = list(entries(package))
    assert len(found) > 200
    problems = {entry.path: issues for entry in found if (issues := problems_of(entry))}
    assert problems == {}


def test_every_docstring_parses(caplog: pytest.LogCaptureFixture) -> None:
    """A section griffe cannot read (a bad indent, a name without a description) is a warning."""
    with caplog.at_level(logging.WARNING, logger="griffe"):
        package = griffe.load("helix_dbos", search_paths=[str(ROOT)], docstring_parser="google",
                              resolve_aliases=True, resolve_external=False)
        for entry in entries(package):
            for member in [entry, *(entry.members.values() if entry.is_class else [])]:
                if not member.is_alias and member.docstring is not None:
                    member.docstring.parsed  # noqa: B018 (parsing is what logs)
    assert [record.getMessage() for record in caplog.records] == []


def test_a_parameter_left_out_of_args_is_found() -> None:
    module = griffe.visit("example", Path("example.py"), '''
def start(agent, input, session_id=None):
    """Start a run.

    Args:
        agent: The agent.
        inptu: A misspelt parameter.
    """
''', docstring_parser=griffe.Parser.google)
    assert problems_of(module["start"]) == [
        "parameter 'input' not under Args", "parameter 'session_id' not under Args",
        "Args lists 'inptu', which is no parameter",
    ]


def test_a_documented_function_passes() -> None:
    module = griffe.visit("example", Path("example.py"), '''
def start(agent, *inputs, **options):
    """Start a run.

    Args:
        agent: The agent.
        *inputs: The inputs.
        **options: The options.
    """
''', docstring_parser=griffe.Parser.google)
    assert problems_of(module["start"]) == []
