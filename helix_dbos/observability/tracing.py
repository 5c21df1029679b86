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

**Nesting.** A run nests under the span it was started from, which its request carries
durably (``RunRequest.trace_parent``, a W3C ``traceparent`` taken when the run is
planned): the caller's span (an agent started from the user's own traced code or DBOS
workflow) or the call that started a sub-agent or companion. Because it is in the
request, a run taken from a queue by another worker, or recovered there after a crash,
nests in the same place. A run started from no span joins its root session's trace.

When the span current as the run's workflow starts is not helix's own and lies in the
trace the run belongs to, the run nests under it instead: DBOS's workflow span (DBOS's
tracing on), which itself descends from the caller's span. helix starts every run's
workflow in DBOS's ``PropagateOtelContext`` (a child's in its call's span), so DBOS's
span of it stays under the caller's span or the call even when a worker takes it from
a queue or recovers it elsewhere. A DBOS span of another trace (a run started from no
span) is linked, not nested under.

A run nested in another trace than its session's carries ``helix.session.trace_id`` and
a link to the session's trace.

**Span ids that survive a crash.** With :class:`~helix_dbos.observability.span_ids.StableSpanIds`
as the ``TracerProvider``'s id generator, the run, step and child-call spans of a
workflow get span ids derived from the workflow id, the step and the call id: the
execution that recovers a run makes spans with the ids the killed one had, so what the
killed execution finished (ended spans) hangs under the recovered step, and a recovered
child's run under its call's span. Without it ids are random, and those spans point at
parents the backend never receives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from dbos import PropagateOtelContext
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER = trace.get_tracer("helix_dbos")
"""helix's tracer: a proxy until the app installs a ``TracerProvider``."""

_ours: ContextVar[Span | None] = ContextVar("helix_span", default=None)
"""helix's innermost span in this context: a current span that is helix's own is not a caller's."""
_span_key: ContextVar[tuple[str, ...] | None] = ContextVar("helix_span_key", default=None)
"""The key of the span being started, whose id :class:`~helix_dbos.observability.span_ids.StableSpanIds` derives."""
_W3C = TraceContextTextMapPropagator()


def session_span_context(session_id: str) -> SpanContext:
    """The span context every run of ``session_id`` descends from (never exported)::

        >>> format(session_span_context("s1").trace_id, "032x")
        'e8bc163c82eee18733288c7d4ac636db'

    Args:
        session_id: The session.

    Returns:
        A remote, sampled span context whose trace id is derived from the session id.
    """
    digest = hashlib.sha256(session_id.encode()).digest()
    return SpanContext(
        trace_id=int.from_bytes(digest[:16], "big") or 1,
        span_id=int.from_bytes(digest[16:24], "big") or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def trace_parent(span: Span | None = None) -> str | None:
    """The W3C ``traceparent`` of ``span`` (default: the current span), for a run started
    here to nest under (None: no span, or tracing is off)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=None if span is None else trace.set_span_in_context(span))
    return carrier.get("traceparent")


def run_parent(trace_session_id: str, traceparent: str | None = None) -> tuple[otel_context.Context, list[Link]]:
    """Where a run's span goes: under ``traceparent`` (what it was started from), else in
    the session's own trace; under the current span instead when that one is not helix's
    and is in that same trace (DBOS's workflow span). Links: a current span of another
    trace, and the session's trace when the run nests in another."""
    session = session_span_context(trace_session_id)
    intended = _W3C.extract({"traceparent": traceparent}) if traceparent else None
    if intended is None or not trace.get_current_span(intended).get_span_context().is_valid:
        intended = trace.set_span_in_context(NonRecordingSpan(session))
    parent = intended
    links = []
    current = trace.get_current_span()
    foreign = current.get_span_context()
    if foreign.is_valid and current is not _ours.get():
        if foreign.trace_id == trace.get_current_span(intended).get_span_context().trace_id:
            parent = otel_context.get_current()
        else:
            links.append(Link(foreign))
    if trace.get_current_span(parent).get_span_context().trace_id != session.trace_id:
        links.append(Link(session))
    return parent, links


def unrecorded_span(context: otel_context.Context) -> Span:
    """The span the API's no-op tracer starts in ``context``: its current span when that
    one records nothing, else a span of the same context that records nothing."""
    span = trace.get_current_span(context)
    return span if isinstance(span, NonRecordingSpan) else NonRecordingSpan(span.get_span_context())


def stable_span_id(key: tuple[str, ...]) -> int:
    """The span id :class:`~helix_dbos.observability.span_ids.StableSpanIds` gives the
    span of ``key``: its kind (run, step, call), its workflow id and the step or call::

        >>> format(stable_span_id(("step", "helix:s1:run:1", "2")), "016x")
        '747cded9910e04b8'
    """
    digest = hashlib.sha256(json.dumps(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def start_span(name: str, key: tuple[str, ...] | None = None, **kwargs: Any) -> Span:
    """``TRACER.start_span(name, **kwargs)``; with ``key``, the span's id is
    :func:`stable_span_id` of it where the app installed ``StableSpanIds``."""
    if key is None:
        return TRACER.start_span(name, **kwargs)
    token = _span_key.set(key)
    try:
        return TRACER.start_span(name, **kwargs)
    finally:
        _span_key.reset(token)


def chosen_span_id() -> int | None:
    """The span id chosen for the span being started, if any (read by ``StableSpanIds``;
    derived only then, so tracing off costs no hashing)."""
    key = _span_key.get()
    return None if key is None else stable_span_id(key)


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
    """Start child workflows in this block, under ``span``: DBOS's spans of them descend
    from it (``PropagateOtelContext``, which DBOS keeps with the workflow), and a request
    built here carries it (:func:`trace_parent`)."""
    with current(span), PropagateOtelContext():
        yield
