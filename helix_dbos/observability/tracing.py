"""OpenTelemetry traces of sessions: one trace per session, whatever ran it and when.

helix uses only the OpenTelemetry API (the tracer ``helix_dbos``); which SDK, sampler
and exporter run is the app's choice, as with DBOS. Without an SDK every span is a
no-op.

**One trace per session.** A run's span has as parent a span context that no process
exports, derived from the session id (:func:`session_span_context`: trace id = the first
16 bytes of ``sha256(session id)``, span id = the next 8). Every run of the session, on
any worker, after a crash or a week-long wait, lands in that trace, and a sub-agent's or
companion's run in its root session's trace. A backend shows the runs as roots of the
trace (their common parent is never exported).

**Nesting.** A run nests instead under the span current when its workflow starts, when
that span is not helix's own: the caller's (an agent started from the user's own
traced code or workflow) or DBOS's workflow span (DBOS's tracing on). Its trace is then
the caller's, and the span carries ``helix.session.trace_id`` and a link to the session's
trace. A sub-agent's or companion's run started in this process nests under the call
that started it (:func:`launching`); one started elsewhere (after a crash, from a queue)
joins its root session's trace as a root, with ``helix.parent_session_id``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, TraceFlags

TRACER = trace.get_tracer("helix_dbos")
"""helix's tracer: a proxy until the app installs a ``TracerProvider``."""

_ours: ContextVar[Span | None] = ContextVar("helix_span", default=None)
"""helix's innermost span in this context: a current span that is helix's own is not a caller's."""
_launcher: ContextVar[Span | None] = ContextVar("helix_launcher", default=None)
"""The call span that starts a child workflow, which that child's run nests under."""


def session_span_context(session_id: str) -> SpanContext:
    """The span context every run of ``session_id`` descends from (never exported)::

        >>> format(session_span_context("s1").trace_id, "032x")
        'e8bc163c82eee18733288c7d4ac636db'
    """
    digest = hashlib.sha256(session_id.encode()).digest()
    return SpanContext(
        trace_id=int.from_bytes(digest[:16], "big") or 1,
        span_id=int.from_bytes(digest[16:24], "big") or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def run_parent(trace_session_id: str) -> tuple[otel_context.Context, list[Link]]:
    """Where a run's span goes: under the caller's (or DBOS's) current span, or the call
    that launched it, or else the session's own trace; with a link to the session's
    trace when it nests under a span of another trace."""
    session = session_span_context(trace_session_id)
    current = trace.get_current_span()
    if current.get_span_context().is_valid and (current is not _ours.get() or current is _launcher.get()):
        links = [] if current.get_span_context().trace_id == session.trace_id else [Link(session)]
        return otel_context.get_current(), links
    return trace.set_span_in_context(NonRecordingSpan(session)), []


@contextmanager
def current(span: Span) -> Iterator[Span]:
    """Make ``span`` (one of helix's) the current span while the block runs."""
    token = otel_context.attach(trace.set_span_in_context(span))
    ours = _ours.set(span)
    try:
        yield span
    finally:
        _ours.reset(ours)
        otel_context.detach(token)


@contextmanager
def launching(span: Span) -> Iterator[None]:
    """Start child workflows in this block: their runs nest under ``span``."""
    launcher = _launcher.set(span)
    try:
        with current(span):
            yield
    finally:
        _launcher.reset(launcher)
