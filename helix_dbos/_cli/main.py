"""The ``helix-dbos`` command: admin shell for agent sessions, migrations and the demo.

Every command takes ``--database-url`` (else ``HELIX_DATABASE_URL``, else
``DBOS_SYSTEM_DATABASE_URL``). Only ``demo`` starts an embedded Postgres when none is set;
``helix-dbos --embedded COMMAND`` runs any command on it. Only ``migrate`` changes the
schema: the others check it and say what to run. Errors print one line to stderr and exit
non-zero; ``--json`` prints machine-readable output. ``worker``, ``recover`` and ``serve``
log the ``helix_dbos`` logger's records (INFO and up, or ``$HELIX_LOG_LEVEL``) to stderr.

Exit codes: 0 ok, 1 not found / not pending / failed, 2 usage.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import shlex
import shutil
import sys
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, TypeVar

import click

from helix_dbos._client.queues import DEFAULT_QUEUE
from helix_dbos._database import check_connection, embedded_pgdata, resolve_database_url, start_embedded
from helix_dbos._error_text import first_line
from helix_dbos.errors import HelixError
from helix_dbos.events import compact as _compact
from helix_dbos.types import SessionStatus

F = TypeVar("F", bound=Callable[..., Any])

EXIT_NOT_FOUND = 1
EXIT_RUN_DID_NOT_COMPLETE = 1


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
    help="Postgres URL of the DBOS system database (default: $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).",
)


def connect_url(database_url: str | None) -> str:
    """Resolve the URL (never to an embedded server); commands check it when they run."""
    return resolve_database_url(database_url)


EMBEDDED_MAY_CREATE = frozenset({"demo", "migrate", "worker", "recover", "serve"})
"""The commands ``--embedded`` lets create the embedded Postgres; the others only read one."""
LOGGING_COMMANDS = frozenset({"worker", "recover", "serve"})
"""The commands that log to stderr (the library alone stays silent)."""
LOG_LEVEL_VAR = "HELIX_LOG_LEVEL"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--embedded", is_flag=True,
    help="Run the command on the embedded Postgres that `helix-dbos demo` uses (./.helix/pgdata, or"
         " $HELIX_EMBEDDED_PGDATA), started for the command's lifetime.",
)
@click.pass_context
def main(ctx: click.Context, embedded: bool) -> None:
    """helix-dbos: durable AI agents on DBOS and Postgres."""
    if ctx.invoked_subcommand in LOGGING_COMMANDS:
        log_to_stderr()
    if embedded:
        use_embedded(ctx.invoked_subcommand)


def use_embedded(command: str | None) -> None:
    """Start the embedded Postgres for this process and make it the command's database
    (``HELIX_DATABASE_URL``, which an app module a worker imports reads too)."""
    pgdata = embedded_pgdata()
    if command not in EMBEDDED_MAY_CREATE and not (pgdata / "PG_VERSION").is_file():
        _fail(f"no embedded Postgres in {pgdata.resolve()}: run helix-dbos demo first, or run this command from the"
              f" directory you ran it in (or set HELIX_EMBEDDED_PGDATA)")
    try:
        os.environ["HELIX_DATABASE_URL"] = start_embedded(pgdata)
    except HelixError as exc:
        _fail(str(exc))


def log_to_stderr() -> None:
    """Send the ``helix_dbos`` logger's records at ``$HELIX_LOG_LEVEL`` (default INFO) and
    up to stderr, one line each: a worker's lifecycle, answers, failed runs."""
    name = os.environ.get(LOG_LEVEL_VAR, "INFO").strip().upper()
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        _fail(f"{LOG_LEVEL_VAR}={name!r} is not a log level (DEBUG, INFO, WARNING, ERROR)", code=2)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("helix_dbos")
    logger.addHandler(handler)
    logger.setLevel(level)


@main.command()
@database_url_option
@helix_errors
def migrate(database_url: str | None) -> None:
    """Create or upgrade the helix schema (idempotent)."""
    from helix_dbos._store.migrations import migrate as apply_migrations
    from helix_dbos.memory.store import TEXT_ONLY_NOTICE, vector_available

    url = resolve_database_url(database_url)
    check_connection(url)
    migrated = apply_migrations(url)
    if migrated.versions:
        click.echo(f"applied migrations: {', '.join(str(v) for v in migrated.versions)}")
    else:
        click.echo("schema is up to date")
    if not vector_available(url):
        click.echo(f"note: {TEXT_ONLY_NOTICE}", err=True)


@main.command()
@database_url_option
@click.option("--model", default=None, help="A litellm model (e.g. openai/gpt-4o-mini); default: a scripted model.")
@click.option("--question", default="Why do agent runs on DBOS survive crashes?", show_default=True)
@helix_errors
def demo(database_url: str | None, model: str | None, question: str) -> None:
    """Run a research agent end to end and print every step, then the commands that show
    its session; exit 1 unless it completed."""
    from helix_dbos.demo import FOLLOW_UP, describe, research_agent, scripted_research
    from helix_dbos.llm import LiteLLMAdapter, MockLLMAdapter
    from helix_dbos._client.launcher import launch_standalone, shutdown

    url = resolve_database_url(database_url, allow_embedded=True)
    check_connection(url)
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
        if result.status == "completed" and not model:
            follow_up = executor.execute(agent, FOLLOW_UP)
            click.echo(f"\nsession {follow_up.session_id}, a new conversation that recalls the first one's memory")
            for event in executor.stream(follow_up.session_id, idle_timeout=60):
                line = describe(event)
                if line:
                    click.echo(line)
            follow_up.result(timeout=120)
    finally:
        shutdown()
    for line in next_commands(handle.session_id, database_url):
        click.echo(line)
    if result.status != "completed":
        sys.exit(EXIT_RUN_DID_NOT_COMPLETE)


def next_commands(session_id: str, database_url: str | None) -> list[str]:
    """What the demo prints last: the commands that show its session, written the way
    they work from here (this program's path when it is not on PATH; ``--embedded`` when
    the demo ran on the embedded Postgres)."""
    ctx = click.get_current_context()
    source = ctx.get_parameter_source("database_url")
    embedded = bool(ctx.find_root().params.get("embedded"))
    words = [*program(), *(["--embedded"] if embedded or database_url is None and not _configured() else [])]
    flag = ["--database-url", database_url] if source is click.core.ParameterSource.COMMANDLINE and database_url else []
    sid = shlex.quote(session_id)
    prefix = shlex.join(words)
    lines = ["", "Look at what the demo did:"]
    lines += [f"  {prefix} {command}{' ' + shlex.join(flag) if flag else ''}"
              for command in (f"show {sid}", f"tail {sid}", f"state {sid}", "sessions")]
    if "--embedded" in words:
        pgdata = embedded_pgdata()
        where = f"Run them from {os.getcwd()}: " if not pgdata.is_absolute() else ""
        lines.append(f"{where}--embedded starts the embedded Postgres in {pgdata} for each command.")
    elif not flag:
        lines.append("Run them with the same HELIX_DATABASE_URL (or DBOS_SYSTEM_DATABASE_URL) as the demo.")
    if words[0] != "helix-dbos" and shutil.which("helix-dbos") is None:
        venv = _venv()
        lines.append("helix-dbos is not on your PATH here: call it as above"
                     + (f", or activate its virtualenv first (source {shlex.quote(venv)}/bin/activate)." if venv else "."))
    return lines


def _configured() -> bool:
    return any(os.environ.get(var) for var in ("HELIX_DATABASE_URL", "DBOS_SYSTEM_DATABASE_URL"))


def program() -> list[str]:
    """How to start this program again from the current directory: ``helix-dbos`` when
    that name on PATH is this program, else its path, or ``PYTHON -m helix_dbos``."""
    script = os.path.abspath(sys.argv[0])
    if os.path.basename(script) == "__main__.py":
        python = sys.executable
        for name in ("python3", "python"):
            found = shutil.which(name)
            if found and os.path.abspath(found) == os.path.abspath(python):
                python = name
                break
        else:
            python = _here(python)
        return [python, "-m", "helix_dbos"]
    found = shutil.which("helix-dbos")
    if found and os.path.abspath(found) == script:
        return ["helix-dbos"]
    return [_here(script)]


def _here(path: str) -> str:
    """``path`` relative to the current directory when it is below it, else absolute."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else os.path.abspath(path)


def _venv() -> str | None:
    """The virtualenv this program runs in (relative when below the current directory)."""
    return _here(sys.prefix) if sys.prefix != getattr(sys, "base_prefix", sys.prefix) else None


# --- operator commands ----------------------------------------------------------------------
# Thin shells over helix_dbos.admin: no agent is imported and DBOS is not launched, and
# the admin module (with DBOS's client, imported only when a workflow must be reached) is
# imported when a command runs, so `helix-dbos --help` stays fast.

EXIT_INTERRUPTED = 130

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of text.")


def operator_errors(func: F) -> F:
    """One ``error:`` line on stderr and exit 1 for any failure: a :class:`HelixError`
    (not found, not pending, already answered, ...) or the database or DBOS failing
    (``error: TypeName: its first line``).

    Args:
        func: The command's callback.

    Returns:
        The callback, wrapped.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except HelixError as exc:
            _fail(str(exc))
        except Exception as exc:
            line = first_line(exc)
            _fail(line if line == type(exc).__name__ else f"{type(exc).__name__}: {line}")

    return wrapper  # type: ignore[return-value]


def _admin() -> Any:
    from helix_dbos import admin

    return admin


def _to_jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_to_jsonable(v) for v in value]
    return value


def _print_json(value: Any, indent: int | None = 2) -> None:
    click.echo(json.dumps(_to_jsonable(value), indent=indent, ensure_ascii=False))


def _when(value: Any) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def _table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for line in [headers, *rows]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())


def _report_answer(outcome: Any, as_json: bool, line: str) -> None:
    """Print what an answer did (``line``, or the outcome as JSON); an answer that changed
    nothing is an error (exit 1)."""
    if outcome.status == "already_answered":
        _fail(
            f"tool call {outcome.tool_call_id!r} of session {outcome.session_id!r} was already answered;"
            " the first answer stands"
        )
    if as_json:
        _print_json(outcome)
    else:
        click.echo(line)


@main.command()
@database_url_option
@click.option("--session", "session_id", default=None, help="Only this session's calls (with its sub-sessions').")
@json_option
@operator_errors
def pending(database_url: str | None, session_id: str | None, as_json: bool) -> None:
    """List tool calls waiting for an approval or a client's result."""
    calls = _admin().list_pending(connect_url(database_url), session_id)
    if as_json:
        _print_json(calls)
    elif not calls:
        click.echo("no pending tool calls")
    else:
        _table(
            ["SESSION", "CALL", "TOOL", "KIND", "STEP", "REQUESTED", "DEADLINE", "INPUT"],
            [
                [c.session_id, c.tool_call_id, c.tool_name, c.kind, str(c.step), _when(c.requested_at),
                 _when(c.deadline), _compact(c.input)]
                for c in calls
            ],
        )


@main.command()
@database_url_option
@click.argument("session_id")
@click.argument("tool_call_id")
@click.option("--reason", default=None, help="Why (kept in the audit row).")
@click.option("--as", "approver", default=None, help="Who approves (kept in the audit row).")
@json_option
@operator_errors
def approve(
    database_url: str | None, session_id: str, tool_call_id: str, reason: str | None, approver: str | None, as_json: bool
) -> None:
    """Approve a gated tool call: the tool runs with its original input."""
    outcome = _admin().approve(connect_url(database_url), session_id, tool_call_id, reason=reason, approver=approver)
    _report_answer(outcome, as_json, f"approved {tool_call_id} of session {session_id}")


@main.command()
@database_url_option
@click.argument("session_id")
@click.argument("tool_call_id")
@click.option("--reason", required=True, help="Why; the model reads it as the tool's error result.")
@click.option("--as", "approver", default=None, help="Who denies (kept in the audit row).")
@json_option
@operator_errors
def deny(
    database_url: str | None, session_id: str, tool_call_id: str, reason: str, approver: str | None, as_json: bool
) -> None:
    """Deny a gated tool call: the tool never runs and the model is told why."""
    outcome = _admin().deny(connect_url(database_url), session_id, tool_call_id, reason=reason, approver=approver)
    _report_answer(outcome, as_json, f"denied {tool_call_id} of session {session_id}: {reason}")


@main.command()
@database_url_option
@click.argument("session_id")
@click.argument("tool_call_id")
@click.option("--result", "result_json", default=None, help="The client tool's result, as JSON.")
@click.option("--error", default=None, help="The client tool's error message instead of a result.")
@json_option
@operator_errors
def submit(
    database_url: str | None, session_id: str, tool_call_id: str, result_json: str | None, error: str | None,
    as_json: bool,
) -> None:
    """Give a client-executed tool call its result (--result JSON) or its error (--error MSG)."""
    if (result_json is None) == (error is None):
        raise click.UsageError("give exactly one of --result JSON or --error MSG")
    try:
        result = json.loads(result_json) if result_json is not None else None
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--result") from None
    outcome = _admin().submit(connect_url(database_url), session_id, tool_call_id, result=result, error=error)
    what = "an error for" if error is not None else "the result of"
    _report_answer(outcome, as_json, f"submitted {what} {tool_call_id} of session {session_id}")


@main.command()
@database_url_option
@click.option("--status", default=None, type=click.Choice([s.value for s in SessionStatus]),
              help="Only sessions with this status.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@json_option
@operator_errors
def sessions(database_url: str | None, status: str | None, limit: int, as_json: bool) -> None:
    """List sessions, most recently updated first (--json: one object per session, its id
    as ``session_id``).
    \f

    Args:
        database_url: The database (else $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).
        status: Only sessions with this status.
        limit: At most this many.
        as_json: Print JSON.
    """
    found = _admin().list_sessions(connect_url(database_url), limit=limit, status=status)
    if as_json:
        _print_json([s.model_dump(mode="json", exclude={"messages", "state", "pending"}) for s in found])
    elif not found:
        click.echo("no sessions")
    else:
        _table(
            ["SESSION", "AGENT", "STATUS", "STEPS", "RUNS", "UPDATED"],
            [[s.session_id, s.agent_name, s.status, str(s.step_count), str(s.run_count), _when(s.updated_at)] for s in found],
        )


@main.command()
@database_url_option
@json_option
@operator_errors
def workers(database_url: str | None, as_json: bool) -> None:
    """List the processes that run agents: live, draining, dead, released or adopted."""
    found = _admin().list_workers(connect_url(database_url))
    if as_json:
        _print_json([{k: v.isoformat() if isinstance(v, datetime) else v for k, v in dataclasses.asdict(w).items()}
                     for w in found])
    elif not found:
        click.echo("no workers")
    else:
        _table(
            ["EXECUTOR", "STATUS", "VERSION", "HOST", "PID", "QUEUES", "LAST SEEN", "RUNS", "NOTE"],
            [[w.executor_id, w.status, w.application_version or "-", w.host or "-", str(w.pid or "-"),
              ",".join(w.queues) if w.queues is not None else "all", _when(w.last_seen), str(w.pending_runs), w.note]
             for w in found],
        )


def _tool(name: str, servers: dict[str, str]) -> str:
    """A tool's name, with its MCP server when it came from one: ``read (MCP server files)``."""
    return f"{name} (MCP server {servers[name]})" if name in servers else name


def _describe_message(message: dict[str, Any], servers: dict[str, str]) -> list[str]:
    role = message.get("role")
    if role == "assistant":
        lines = [message["content"]] if message.get("content") else []
        lines += [f"call {_tool(c['name'], servers)} [{c['id']}] {_compact(c.get('arguments'))}"
                  for c in message.get("tool_calls", [])]
        return lines or ["(empty)"]
    if role == "tool":
        label = "error" if message.get("is_error") else "result"
        return [f"{label} {_tool(message['tool_name'], servers)} [{message['tool_call_id']}]:"
                f" {_compact(message['content'], 100)}"]
    return [_compact(message.get("content", ""), 100)]


def _print_session(detail: Any) -> None:
    s = detail.session
    click.echo(f"session  {s.session_id}")
    click.echo(f"agent    {s.agent_name}")
    click.echo(f"status   {s.status}" + (f" ({s.stop_reason})" if s.stop_reason else ""))
    click.echo(f"steps    {s.step_count}, runs {s.run_count}, messages {s.message_count}")
    click.echo(f"created  {_when(s.created_at)}, updated {_when(s.updated_at)}")
    if s.parent_session_id:
        click.echo(f"parent   {s.parent_session_id} (tool call {s.parent_tool_call_id})")
    if detail.forked_from:
        click.echo(f"forked   from {detail.forked_from['session_id']} at step {detail.forked_from['step']}")
    for run in detail.runs:
        if run.stranded:
            click.echo(
                f"stranded run {run.run} waits for a worker of version {run.application_version}; the newest is"
                f" {run.latest_version}: helix-dbos move {s.session_id} --to-version {run.latest_version}"
            )
    if s.output is not None:
        click.echo(f"output   {_compact(s.output, 200)}")
    if s.error:
        click.echo(f"error    {s.error}")
    click.echo("")
    click.echo("transcript")
    for entry in detail.transcript:
        role = entry.message.get("role", "?")
        for i, line in enumerate(_describe_message(entry.message, detail.tool_servers)):
            prefix = f"  {entry.seq:>3}  step {entry.step:<3} {role:<9}" if i == 0 else " " * 26
            click.echo(f"{prefix} {line}")
    click.echo("")
    click.echo(f"state    {_compact(detail.state, 200)}")
    click.echo("")
    click.echo("runs")
    if detail.runs:
        _table(
            ["  RUN", "KIND", "STATUS", "STEPS", "STOP", "STARTED", "ENDED", "WORKFLOW", "EXECUTOR", "VERSION"],
            [
                [f"  {r.run}", r.kind, r.status, _run_steps(r), r.stop_reason or "-", _when(r.started_at),
                 _when(r.ended_at), r.workflow_status or "-", r.executor_id or "-", r.application_version or "-"]
                for r in detail.runs
            ],
        )
        for r in detail.runs:
            for adoption in r.adoptions:
                click.echo(f"  run {r.run} {adoption.summary()}")
    else:
        click.echo("  none")
    click.echo("")
    click.echo("pending")
    if detail.pending:
        _table(
            ["  CALL", "TOOL", "KIND", "SESSION", "DEADLINE", "INPUT"],
            [[f"  {c.tool_call_id}", _tool(c.tool_name, detail.tool_servers), c.kind, c.session_id, _when(c.deadline), _compact(c.input)]
             for c in detail.pending],
        )
    else:
        click.echo("  none")
    if detail.answers:
        click.echo("")
        click.echo("answers")
        _table(
            ["  CALL", "KIND", "ANSWER", "BY", "AT", "REASON"],
            [
                [f"  {a.tool_call_id}", a.kind, _answer_word(a), a.answered_by or "-", _when(a.answered_at),
                 a.reason or "-"]
                for a in detail.answers
            ],
        )
    u = detail.usage
    click.echo("")
    cost = f"${u.cost_usd:.6f}" if u.cost_usd is not None else "-"
    click.echo(
        f"usage    llm {u.llm_calls} calls, {u.total_tokens} tokens ({u.input_tokens} in, {u.output_tokens} out),"
        f" cost {cost}; tools {u.tool_calls} calls, {u.tool_ms:.0f} ms; client wait {u.client_tool_wait_ms:.0f} ms"
    )
    if detail.children:
        click.echo("")
        click.echo("sub-agent and companion sessions")
        depth = {detail.session.session_id: 0}
        for child in detail.children:
            depth[child.session_id] = depth.get(child.parent_session_id or "", 0) + 1
        _table(
            ["  SESSION", "AGENT", "STATUS", "STEPS", "TOOL CALL"],
            [[f"{'  ' * depth[c.session_id]}{c.session_id}", c.agent_name, c.status, str(c.step_count), c.parent_tool_call_id or "-"]
             for c in detail.children],
        )


def _run_steps(run: Any) -> str:
    """The steps a run committed: ``3-5``, ``3-`` while it runs, ``-`` for none."""
    if run.end_step is None:
        return f"{run.start_step + 1}-"
    return f"{run.start_step + 1}-{run.end_step}" if run.end_step > run.start_step else "-"


def _answer_word(answer: Any) -> str:
    if answer.kind == "approval":
        return "approved" if answer.approved else "denied"
    return "error" if (answer.answer or {}).get("error") is not None else "result"


@main.command()
@database_url_option
@click.argument("session_id")
@json_option
@operator_errors
def show(database_url: str | None, session_id: str, as_json: bool) -> None:
    """Show a session: transcript, state, runs, pending calls, answers, usage, children."""
    detail = _admin().show_session(connect_url(database_url), session_id)
    if as_json:
        _print_json(detail)
    else:
        _print_session(detail)


@main.command()
@database_url_option
@click.argument("session_id")
@click.option("--at-step", "step", default=None, type=click.IntRange(min=0), help="As it was after this step.")
@json_option
@operator_errors
def state(database_url: str | None, session_id: str, step: int | None, as_json: bool) -> None:
    """Print a session's custom state, now or after step N (rebuilt from the patch log)."""
    value = _admin().state_at(connect_url(database_url), session_id, step)
    _print_json(value, indent=None if as_json else 2)


def _describe_event(record: Any) -> str:
    summary = record.event.summary()
    return f"{record.seq:>5}  run {record.run}  step {record.step:<3} {record.type:<22} {summary}".rstrip()


@main.command()
@database_url_option
@click.argument("session_id")
@click.option("--from-seq", default=0, show_default=True, type=click.IntRange(min=0), help="First event to print.")
@click.option("--follow/--no-follow", default=True, show_default=True,
              help="Keep printing new events until the run in progress ends.")
@click.option("--deltas", is_flag=True,
              help="Also print the model's text as it is generated (with --json: every token delta).")
@json_option
@operator_errors
def tail(database_url: str | None, session_id: str, from_seq: int, follow: bool, deltas: bool, as_json: bool) -> None:
    """Print a session's event stream (with --json: one JSON object per line).
    \f

    Args:
        database_url: The database (else $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).
        session_id: The session.
        from_seq: The first event to print.
        follow: Keep printing until the run in progress ends.
        deltas: Also print the model's text as it is generated.
        as_json: One JSON object per line.
    """
    open_line: tuple[str, int, int, int] | None = None  # (session, run, step, attempt) of an unended line
    adoptions = _Adoptions(connect_url(database_url), session_id)
    try:
        for item in _admin().stream(connect_url(database_url), session_id, from_seq, follow=follow, deltas=deltas):
            if as_json:
                data = item.model_dump(mode="json", exclude_none=item.type == "delta")
                click.echo(json.dumps(data, ensure_ascii=False))
            elif item.type == "delta":
                open_line = _print_delta(item, open_line, session_id)
            else:
                for line in adoptions.until(item):
                    click.echo(("\n" if open_line else "") + line)
                    open_line = None
                click.echo(("\n" if open_line else "") + _describe_event(item))
                open_line = None
        if not as_json:
            for line in adoptions.until(None):
                click.echo(("\n" if open_line else "") + line)
                open_line = None
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


class _Adoptions:
    """The session's run adoptions as tail lines, each printed once, before the first event
    after it (read again at each run's and step's start, when an adopted run goes on)."""

    def __init__(self, url: str, session_id: str) -> None:
        self.url, self.session_id = url, session_id
        self.shown: set[tuple[int, str]] = set()
        self.known: list[tuple[datetime, int, Any]] | None = None

    def until(self, event: Any) -> list[str]:
        """Lines for the adoptions before ``event`` (None: all of them)."""
        if self.known is None or event is None or event.type in ("run_start", "step_start"):
            self.known = sorted(((a.adopted_at, r.run, a) for r in _admin().list_runs(self.url, self.session_id)
                                 for a in r.adoptions), key=lambda known: known[0])
        lines = []
        for at, run, adoption in self.known:
            if (run, adoption.from_executor) not in self.shown and (event is None or at <= event.created_at):
                self.shown.add((run, adoption.from_executor))
                lines.append(f"{'':>5}  run {run}  {'':<8} {'adopted':<22} {adoption.summary()}")
        return lines


def _print_delta(
    delta: Any, open_line: tuple[str, int, int, int] | None, session_id: str
) -> tuple[str, int, int, int] | None:
    """Print a text delta after the text of its attempt so far (a new attempt, after a
    retry or a crash, or another session's text starts a new line; a sub-agent's lines
    name it); returns the attempt whose line is open."""
    if delta.kind != "text":
        return open_line
    attempt = (delta.session_id, delta.run, delta.step, delta.attempt)
    if attempt == open_line:
        click.echo(delta.text, nl=False)
    else:
        start = f"{'':>5}  run {delta.run}  step {delta.step:<3} {'text (live)':<22} "
        if delta.session_id != session_id:
            start += f"{delta.session_id}: "
        click.echo(("\n" if open_line else "") + start + delta.text, nl=False)
    return attempt


@main.command()
@database_url_option
@click.argument("session_id")
@json_option
@operator_errors
def interrupt(database_url: str | None, session_id: str, as_json: bool) -> None:
    """Ask the run in progress to stop after its current step (resumable).

    The session (and its running sub-agents) becomes interrupted when the step ends;
    a worker that registered the agent continues it: executor.resume(agent, session_id).
    \f

    Args:
        database_url: The database (else $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).
        session_id: The session.
        as_json: Print what was asked as JSON.
    """
    done = _admin().interrupt(connect_url(database_url), session_id)
    if as_json:
        _print_json(done)
    else:
        click.echo(f"asked run {done.run} of session {session_id} to stop after its current step; status {done.status}")


ABORT_REASON = "aborted by an operator"
"""What ``abort`` records as the run's error when given no ``--reason``."""


@main.command()
@database_url_option
@click.argument("session_id")
@click.option("--reason", default=ABORT_REASON, show_default=True, help="Recorded as the run's error.")
@json_option
@operator_errors
def abort(database_url: str | None, session_id: str, reason: str, as_json: bool) -> None:
    """Abort the run in progress now (its workflow is cancelled; the run ends aborted).
    \f

    Args:
        database_url: The database (else $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).
        session_id: The session.
        reason: Recorded as the run's error.
        as_json: Print what was done as JSON.
    """
    _report_abort(_admin().abort(connect_url(database_url), session_id, reason=reason), session_id, as_json)


def _report_abort(done: Any, session_id: str, as_json: bool) -> None:
    """Print what an abort did: the run it ended, or that it had ended by itself."""
    if as_json:
        _print_json(done)
    elif done.changed:
        click.echo(f"aborted run {done.run} of session {session_id} (workflow {done.workflow_id}); status {done.status}")
    else:
        click.echo(f"run {done.run} of session {session_id} had already ended; status {done.status}")


@main.command(hidden=True)
@database_url_option
@click.argument("session_id")
@click.option("--reason", default=ABORT_REASON, show_default=True, help="Recorded as the run's error.")
@json_option
@operator_errors
def cancel(database_url: str | None, session_id: str, reason: str, as_json: bool) -> None:
    """Deprecated: helix-dbos abort.
    \f

    Args:
        database_url: The database.
        session_id: The session.
        reason: Recorded as the run's error.
        as_json: Print what was done as JSON.
    """
    click.echo("warning: helix-dbos cancel is deprecated and will be removed in the next release;"
               " use helix-dbos abort", err=True)
    _report_abort(_admin().abort(connect_url(database_url), session_id, reason=reason), session_id, as_json)


@main.command()
@database_url_option
@click.argument("session_id")
@click.option("--queue", default=None,
              help="Start a new run of an interrupted, failed or forked session on this queue, for its workers.")
@json_option
@operator_errors
def resume(database_url: str | None, session_id: str, queue: str | None, as_json: bool) -> None:
    """Resume a stopped session where it stopped.

    An aborted or crashed run's workflow continues. An interrupted, failed or forked
    session needs a new run: --queue enqueues it for the workers of that queue (or a
    process that registered the agent calls executor.resume(agent, session_id)).
    \f

    Args:
        database_url: The database (else $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).
        session_id: The session.
        queue: Enqueue a new run on this queue when the session needs one.
        as_json: Print what was done as JSON.
    """
    done = _admin().resume(connect_url(database_url), session_id, queue)
    if as_json:
        _print_json(done)
    elif done.enqueued_on is not None:
        click.echo(f"resumed session {session_id}: new run {done.run} enqueued on {done.enqueued_on!r}"
                   f" (workflow {done.workflow_id})")
    else:
        click.echo(f"resumed run {done.run} of session {session_id} (workflow {done.workflow_id}); status {done.status}")


@main.command()
@database_url_option
@click.argument("session_id")
@click.option("--to-version", "version", required=True, help="The DBOS application version to move the run to.")
@click.option("--queue", default=DEFAULT_QUEUE, show_default=True, help="The queue the new version's workers listen on.")
@json_option
@operator_errors
def move(database_url: str | None, session_id: str, version: str, queue: str, as_json: bool) -> None:
    """Move a run stranded on an old application version to VERSION (a new run, from the last committed step).
    \f

    Args:
        database_url: The database (else $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).
        session_id: The session.
        version: The DBOS application version to move the run to.
        queue: The queue the new version's workers listen on (default: the executor's
            default queue).
        as_json: Print the new run as JSON.
    """
    done = _admin().move(connect_url(database_url), session_id, version, queue)
    if as_json:
        _print_json(done)
    else:
        click.echo(f"moved session {session_id} to version {version}: run {done.run} enqueued on {queue!r}"
                   f" (workflow {done.workflow_id})")


_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_cutoff(text: str) -> timedelta | datetime:
    """``30d``, ``12h``, ``90m`` or ``45s`` (that long ago), or an ISO 8601 time (UTC when
    it names no zone)::

        >>> parse_cutoff("30d")
        datetime.timedelta(days=30)
    """
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    if unit in _UNITS and number.isdigit():
        return timedelta(**{_UNITS[unit]: int(number)})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise HelixError(f"--completed-before {text!r} is neither a duration (30d, 12h, 90m, 45s) nor an ISO time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


@main.command()
@database_url_option
@click.option("--completed-before", "cutoff", required=True,
              help="Sessions finished this long ago (30d, 12h, 90m, 45s) or before this ISO time.")
@click.option("--dry-run", is_flag=True, help="Only report what would be removed.")
@click.option("--batch-size", default=100, show_default=True, type=click.IntRange(min=1),
              help="Session trees removed per transaction.")
@json_option
@operator_errors
def prune(database_url: str | None, cutoff: str, dry_run: bool, batch_size: int, as_json: bool) -> None:
    """Remove finished sessions (completed, failed, aborted), each with its sub-agent
    sessions, and their DBOS workflows. A session with a run in progress, a call still
    pending, a sub-agent still running, or an interrupted one, stays."""
    report = _admin().prune(connect_url(database_url), parse_cutoff(cutoff), dry_run=dry_run, batch_size=batch_size)
    if as_json:
        _print_json(report)
        return
    verb = "would remove" if dry_run else "removed"
    batches = f"{report.batches} batch" + ("" if report.batches == 1 else "es")
    click.echo(f"{verb} {len(report.roots)} session trees ({report.sessions} sessions, {report.workflows} DBOS "
               f"workflows) in {batches}")
    for root in report.roots:
        click.echo(f"  {root}")


@main.command()
@database_url_option
@click.argument("session_id")
@click.option("--from-step", "from_step", required=True, type=click.IntRange(min=0), help="Fork after this step.")
@json_option
@operator_errors
def fork(database_url: str | None, session_id: str, from_step: int, as_json: bool) -> None:
    """Copy a session as it was after step N into a new, interrupted session.
    \f

    Args:
        database_url: The database (else $HELIX_DATABASE_URL, $DBOS_SYSTEM_DATABASE_URL).
        session_id: The source session.
        from_step: Fork after this step.
        as_json: Print the new session's row as JSON.
    """
    created = _admin().fork(connect_url(database_url), session_id, from_step)
    if as_json:
        _print_json(created.model_dump(mode="json", exclude={"messages", "state", "pending"}))
    else:
        click.echo(f"forked session {session_id} after step {from_step} into {created.session_id} (status {created.status})")
        click.echo(f"continue it from a worker that registered agent {created.agent_name!r}:"
                   f" executor.resume({created.agent_name!r}, {created.session_id!r}), or enqueue its run for"
                   f" the workers of a queue: helix-dbos resume {created.session_id} --queue QUEUE")


from helix_dbos._cli.worker import recover_command, serve_command, worker_command  # noqa: E402  (scale-out)

main.add_command(worker_command)
main.add_command(serve_command)
main.add_command(recover_command)
