"""The ``helix-dbos`` command: admin shell for agent sessions, migrations and the demo.

Every command takes ``--database-url`` (else ``HELIX_DATABASE_URL``, else
``DBOS_SYSTEM_DATABASE_URL``, else the embedded Postgres). Errors print one line to
stderr and exit non-zero; ``--json`` prints machine-readable output.

Exit codes: 0 ok, 1 not found / not pending / failed, 2 usage.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable, TypeVar

import click

from helix_dbos.database import check_connection, resolve_database_url
from helix_dbos.errors import HelixError
from helix_dbos.store.migrations import migrate as apply_migrations

F = TypeVar("F", bound=Callable[..., Any])

EXIT_NOT_FOUND = 1


def _fail(message: str, code: int = EXIT_NOT_FOUND) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def helix_errors(func: F) -> F:
    """Turn a :class:`HelixError` into one line on stderr and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HelixError as exc:
            _fail(str(exc))

    return wrapper  # type: ignore[return-value]


database_url_option = click.option(
    "--database-url",
    envvar="HELIX_DATABASE_URL",
    default=None,
    help="Postgres URL (default: $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL, else embedded).",
)


def connect_url(database_url: str | None) -> str:
    """Resolve the URL, check it answers, and make sure the schema is current."""
    url = resolve_database_url(database_url)
    check_connection(url)
    apply_migrations(url)
    return url


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """helix-dbos: durable AI agents on DBOS and Postgres."""


@main.command()
@database_url_option
@helix_errors
def migrate(database_url: str | None) -> None:
    """Create or upgrade the helix schema (idempotent)."""
    url = resolve_database_url(database_url)
    check_connection(url)
    applied = apply_migrations(url)
    if applied:
        click.echo(f"applied migrations: {', '.join(str(v) for v in applied)}")
    else:
        click.echo("schema is up to date")


@main.command()
@database_url_option
@click.option("--model", default=None, help="A litellm model (e.g. openai/gpt-4o-mini); default: a scripted model.")
@click.option("--question", default="Why do agent runs on DBOS survive crashes?", show_default=True)
@helix_errors
def demo(database_url: str | None, model: str | None, question: str) -> None:
    """Run a research agent end to end and print every step."""
    from helix_dbos.demo import describe, research_agent, scripted_research
    from helix_dbos.llm import LiteLLMAdapter, MockLLMAdapter
    from helix_dbos.runtime.launch import launch_standalone, shutdown

    url = connect_url(database_url)
    agent = research_agent(model)
    llm = LiteLLMAdapter() if model else MockLLMAdapter(responder=scripted_research)
    executor = launch_standalone(llm, [agent], database_url=url)
    try:
        handle = executor.execute(agent, question)
        click.echo(f"session {handle.session_id}")
        for event in executor.stream(handle.session_id, idle_timeout=60):
            line = describe(event)
            if line:
                click.echo(line)
        result = handle.result(timeout=120)
        click.echo(f"status: {result.status}, steps: {result.step_count}")
        click.echo(f"final state: {json.dumps(executor.get_session(handle.session_id).state)}")
    finally:
        shutdown()
