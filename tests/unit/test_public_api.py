"""The public namespace: ``__all__`` is exactly what ``helix_dbos`` exports, and every
name resolves; the exception tree has one root; the operator API is ``helix_dbos.admin``."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

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

    assert admin.__all__ and all(callable(getattr(admin, name)) for name in admin.__all__)
    assert helix_dbos.admin is admin


ROOT = Path(__file__).resolve().parents[2]
PRIVATE_IMPORT = re.compile(r"helix_dbos\._[a-z]")


def test_what_users_read_imports_public_modules_only() -> None:
    """The README, the docs a user reads and the examples name no private module
    (``helix_dbos._client``...); the contributors' pages may."""
    readable = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").rglob("*.py")]
    contributors = {ROOT / "docs" / "architecture.md", ROOT / "docs" / "development.md"}
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in readable if path not in contributors
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if PRIVATE_IMPORT.search(line)
    ]
    assert found == []


PRIVATE_PATH = re.compile(r"helix_dbos\._[a-z]|(?<![\w/])_(?:client|store|durable|cli)/")


def test_the_reference_s_docstrings_name_no_private_module() -> None:
    """What the API reference shows (every exported name, its methods, the operator API)
    sends no reader into a private module."""
    shown = [getattr(helix_dbos, name) for name in helix_dbos.__all__]
    shown += [member for value in shown if inspect.isclass(value) for _, member in inspect.getmembers(value)
              if inspect.isfunction(member) and not member.__name__.startswith("_")]
    shown += [getattr(helix_dbos.admin, name) for name in helix_dbos.admin.__all__]
    found = {getattr(value, "__qualname__", repr(value)) for value in shown
             if PRIVATE_PATH.search(inspect.getdoc(value) or "")}
    assert found == set()


def test_the_public_modules_are_the_documented_ones() -> None:
    """Each exported name comes from a module that exists; the implementation modules are
    private (a leading underscore) and the public ones are the documented homes."""
    public_modules = {"helix_dbos.agents", "helix_dbos.answers", "helix_dbos.companions", "helix_dbos.errors",
                      "helix_dbos.events", "helix_dbos.llm", "helix_dbos.orchestration", "helix_dbos.remote",
                      "helix_dbos.subagents", "helix_dbos.tools", "helix_dbos.toolsets", "helix_dbos.types"}
    for name, module in helix_dbos._EXPORTS.items():
        assert module in public_modules or module.split(".")[1].startswith("_"), (name, module)
    top = {p.stem for p in (ROOT / "helix_dbos").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    public = {m for m in top if not m.startswith("_")}
    assert public == {"admin", "agents", "answers", "companions", "demo", "errors", "events", "llm", "mcp", "memory",
                      "observability", "orchestration", "remote", "server", "sse", "state", "subagents", "tools",
                      "toolsets", "types"}


def test_mcp_toolsets_live_in_their_own_module() -> None:
    """``helix_dbos.mcp`` (the ``mcp`` extra) holds the MCP toolset; importing helix_dbos,
    or naming its exports, never imports the MCP SDK."""
    import subprocess
    import sys

    import helix_dbos.mcp

    assert helix_dbos.mcp.__all__ == [
        "Backoff", "MCPArguments", "MCPServerError", "MCPTool", "MCPToolError", "MCPToolset", "ToolsetRun",
    ]
    assert helix_dbos.mcp.ToolsetRun is helix_dbos.ToolsetRun
    probe = "import sys, helix_dbos; [getattr(helix_dbos, n) for n in helix_dbos.__all__]; print('mcp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"
