"""Every public operation exists in each form that the table in docs/operations.md
lists, with one name per meaning and a sync and an async twin."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click

from helix_dbos import admin
from helix_dbos._cli.main import main as cli
from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos.server.routes import ROUTES

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

NOT_OPERATIONS = {"register", "agent", "handle", "live", "close_async", "llm", "logger", "close"}
"""Public executor and client members that set a process up rather than operate on sessions."""
DEPRECATED = {"cancel", "cancel_async", "tail"}
CLI_NOT_OPERATIONS = {"demo", "migrate", "worker", "serve", "recover"}


def table() -> list[dict[str, str | None]]:
    """The rows of the "every operation in every form" table: column -> name (None: a dash)."""
    text = DOC.read_text()
    section = text[text.index("## Every operation in every form"):]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    found = []
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(header):
            break
        found.append({h: (re.fullmatch(r"`([^`]+)`", c).group(1) if c != "—" else None)  # type: ignore[union-attr]
                      for h, c in zip(header[1:], cells[1:])})
    return found


def cli_command(name: str) -> click.Command | None:
    """A command of the CLI by what one types: ``show``, or ``memory search`` in a group."""
    group, _, sub = name.partition(" ")
    command = cli.commands.get(group)
    if sub and isinstance(command, click.Group):
        return command.commands.get(sub)
    return None if sub else command


def public_methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")} - NOT_OPERATIONS


def test_each_form_listed_exists_with_both_twins() -> None:
    routes = {f"{method} {route.path.replace(':path', '')}" for route in ROUTES for method in route.methods or []
              if method != "HEAD"}
    for row in table():
        if row["executor"]:
            name = row["executor"]
            assert inspect.iscoroutinefunction(getattr(DBOSAgentExecutor, f"{name}_async", None)) or name == "stream", name
            assert callable(getattr(DBOSAgentExecutor, name)), name
        if row["admin"]:
            name = row["admin"]
            assert callable(getattr(admin, name)) and callable(getattr(admin, f"{name}_async")), name
            assert callable(getattr(admin.AdminClient, name)), name
            twin = getattr(admin.AsyncAdminClient, name)
            assert inspect.iscoroutinefunction(twin) or inspect.isasyncgenfunction(twin), name
            assert inspect.signature(twin).parameters.keys() == inspect.signature(
                getattr(admin.AdminClient, name)).parameters.keys(), name
        if row["CLI"]:
            assert cli_command(row["CLI"]) is not None and not cli_command(row["CLI"]).hidden, row["CLI"]
        if row["HTTP"]:
            assert row["HTTP"] in routes, row["HTTP"]
    assert inspect.isasyncgenfunction(DBOSAgentExecutor.stream_async)


def test_one_name_per_meaning_and_every_operation_is_listed() -> None:
    rows = table()
    for column in ("executor", "admin", "CLI", "HTTP"):
        names = [row[column] for row in rows if row[column]]
        assert len(names) == len(set(names)), f"a {column} name is used for two meanings"
    python_names = [{row["executor"], row["admin"]} - {None} for row in rows]
    for i, names in enumerate(python_names):
        for other in python_names[i + 1:]:
            assert not names & other, names & other
    listed = {name for names in python_names for name in names}
    executor_ops = {n for n in public_methods(DBOSAgentExecutor) if not n.endswith("_async")}
    assert executor_ops - listed == set(), "an executor operation is missing from the table"
    assert public_methods(admin.AdminClient) - listed == set(), "a client operation is missing from the table"
    admin_functions = {n for n in admin.__all__ if n[0].islower() and not n.endswith("_async")} - DEPRECATED
    assert admin_functions - listed == set(), "an admin function is missing from the table"
    commands = {name for name, command in cli.commands.items() if not command.hidden} - CLI_NOT_OPERATIONS
    groups = {name for name, command in cli.commands.items() if isinstance(command, click.Group)}
    commands = commands - groups | {f"{group} {name}" for group in groups
                                    for name, command in cli.commands[group].commands.items() if not command.hidden}
    assert commands - {row["CLI"] for row in rows} == set(), "a CLI command is missing from the table"
    routes = {f"{method} {route.path.replace(':path', '')}" for route in ROUTES for method in route.methods or []
              if method != "HEAD"}
    assert routes - {row["HTTP"] for row in rows} == set(), "a route is missing from the table"


def test_every_admin_function_has_its_async_twin_beside_it() -> None:
    names = set(admin.__all__)
    for name in names:
        if name[0].islower() and not name.endswith("_async") and name != "tail":
            assert f"{name}_async" in names, name
        if name.endswith("_async"):
            assert name.removesuffix("_async") in names, name


def test_the_cli_and_the_admin_api_record_the_same_default_abort_reason() -> None:
    from helix_dbos._cli.main import ABORT_REASON

    assert ABORT_REASON == admin.ABORTED_BY_OPERATOR
