"""``helix-dbos memory``: agent memory for operators (docs/memory.md).

    helix-dbos memory                                  # the mode, spaces, counts by status, namespaces
    helix-dbos memory list user/u-42 [--status failed]
    helix-dbos memory search user "green tea" [--mode text]
    helix-dbos memory show 17
    helix-dbos memory forget user/u-42 --key units     # or --id 17
    helix-dbos memory erase user/u-42 --yes            # everything under the prefix; prints the counts
    helix-dbos memory retry-failed [user]

A namespace is written with ``/`` between its parts (``user/u-42`` is ``("user", "u-42")``);
an empty prefix (``""``, or none where it is optional) means every namespace.
"""

from __future__ import annotations

from typing import Any

import click

from helix_dbos._cli.main import _fail, _print_json, _table, _when, connect_url, database_url_option, operator_errors
from helix_dbos._store.memory_records import Memory, Namespace

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def parse_namespace(text: str) -> Namespace:
    """``user/u-42`` as ``("user", "u-42")``; ``""`` as the empty prefix."""
    return tuple(part for part in text.split("/")) if text else ()


def _store(database_url: str | None) -> Any:
    from helix_dbos._store.migrations import check_schema
    from helix_dbos.memory import MemoryStore

    url = connect_url(database_url)
    check_schema(url)
    return MemoryStore(url)


def _ns(namespace: Namespace) -> str:
    return "/".join(namespace)


def _rows(found: list[Memory]) -> list[list[str]]:
    return [
        [str(m.id), _ns(m.namespace), m.key or "-", m.embedding or "text-only", _when(m.updated_at), _short(m.text)]
        for m in found
    ]


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


@click.group(name="memory", invoke_without_command=True)
@database_url_option
@json_option
@click.pass_context
@operator_errors
def memory_command(ctx: click.Context, database_url: str | None, as_json: bool) -> None:
    """Agent memory: with no subcommand, its mode (vector or text-only), embedding
    spaces, memories by status and namespaces."""
    if ctx.invoked_subcommand is not None:
        return
    store = _store(database_url)
    status, spaces = store.status(), store.namespaces()
    if as_json:
        _print_json({**status, "namespaces": spaces})
        return
    click.echo(f"mode: {status['mode']}")
    for space in status["spaces"]:
        click.echo(f"space: {space['name']}{' (active)' if space['active'] else ''}")
    counts = status["counts"]
    click.echo("memories: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"))
    if spaces:
        _table(["NAMESPACE", "MEMORIES", "PENDING", "FAILED"],
               [[_ns(s["namespace"]), str(s["memories"]), str(s["pending"]), str(s["failed"])] for s in spaces])


@memory_command.command(name="list")
@database_url_option
@click.argument("prefix", default="")
@click.option("--status", type=click.Choice(["pending", "complete", "failed"]), default=None)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@json_option
@operator_errors
def list_command(database_url: str | None, prefix: str, status: str | None, limit: int, as_json: bool) -> None:
    """The newest memories under PREFIX (e.g. user/u-42)."""
    found = _store(database_url).list_memories(parse_namespace(prefix), status=status, limit=limit)
    if as_json:
        _print_json(found)
    else:
        _table(["ID", "NAMESPACE", "KEY", "EMBEDDING", "UPDATED", "TEXT"], _rows(found))


@memory_command.command(name="search")
@database_url_option
@click.argument("prefix")
@click.argument("query")
@click.option("--mode", type=click.Choice(["hybrid", "text", "vector"]), default="text", show_default=True,
              help="hybrid and vector need an embedder; this command searches by text unless told.")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True)
@json_option
@operator_errors
def search_command(database_url: str | None, prefix: str, query: str, mode: str, limit: int, as_json: bool) -> None:
    """Memories under PREFIX that match QUERY, best first."""
    hits = _store(database_url).search(parse_namespace(prefix), query, limit=limit, mode=mode)
    if as_json:
        _print_json(hits)
    else:
        _table(["ID", "NAMESPACE", "KEY", "EMBEDDING", "UPDATED", "TEXT"], _rows([h.memory for h in hits]))


@memory_command.command(name="show")
@database_url_option
@click.argument("memory_id", type=int)
@json_option
@operator_errors
def show_command(database_url: str | None, memory_id: int, as_json: bool) -> None:
    """One memory: its text, metadata, who wrote it and its embedding."""
    found = _store(database_url).get(memory_id)
    if found is None:
        _fail(f"no memory {memory_id}")
    if as_json:
        _print_json(found)
        return
    click.echo(f"memory {found.id} in {_ns(found.namespace)}" + (f" under key {found.key!r}" if found.key else ""))
    click.echo(f"written by: session {found.session_id or '-'}, run {found.run or '-'}, step {found.step or '-'},"
               f" tool call {found.tool_call_id or '-'}")
    click.echo(f"created {_when(found.created_at)}, updated {_when(found.updated_at)}, expires {_when(found.expires_at)}")
    embedding = found.embedding or "text-only"
    if found.embedding_error:
        embedding += f" after {found.embedding_attempts} attempts: {found.embedding_error}"
    click.echo(f"embedding: {embedding}")
    if found.metadata:
        _print_json(found.metadata)
    click.echo(found.text)


@memory_command.command(name="forget")
@database_url_option
@click.argument("namespace")
@click.option("--key", default=None)
@click.option("--id", "memory_id", type=int, default=None)
@operator_errors
def forget_command(database_url: str | None, namespace: str, key: str | None, memory_id: int | None) -> None:
    """Delete one memory of NAMESPACE, by --key or --id, with its vectors."""
    if not _store(database_url).forget(parse_namespace(namespace), key=key, memory_id=memory_id):
        _fail(f"no such memory in {namespace}")
    click.echo(f"forgot {'key ' + repr(key) if key is not None else 'memory ' + str(memory_id)} in {namespace}")


@memory_command.command(name="erase")
@database_url_option
@click.argument("prefix")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@operator_errors
def erase_command(database_url: str | None, prefix: str, yes: bool, as_json: bool) -> None:
    """Delete every memory under PREFIX, vectors included (a person's data: user/u-42)."""
    namespace = parse_namespace(prefix)
    if not yes:
        click.confirm(f"erase every memory under {prefix}?", abort=True)
    counts = _store(database_url).erase(namespace)
    if as_json:
        _print_json(counts)
    else:
        click.echo(f"erased {counts['memories']} memories, {counts['vectors']} vectors and"
                   f" {counts['embeddings']} embedding states under {prefix}")


@memory_command.command(name="retry-failed")
@database_url_option
@click.argument("prefix", default="")
@operator_errors
def retry_failed_command(database_url: str | None, prefix: str) -> None:
    """Make the failed embeddings under PREFIX pending again (the embedding queue takes them up)."""
    count = _store(database_url).retry_failed(parse_namespace(prefix))
    click.echo(f"{count} failed embeddings are pending again")
