"""Span ids that a recovered run makes again: an OpenTelemetry SDK id generator.

Install it in your ``TracerProvider``::

    from opentelemetry.sdk.trace import TracerProvider
    from helix_dbos.observability.span_ids import StableSpanIds

    trace.set_tracer_provider(TracerProvider(id_generator=StableSpanIds()))

helix then gives its run, step and child-call spans ids derived from the workflow id,
the step and the call id (:func:`~helix_dbos.observability.tracing.stable_span_id`); every
other span, and every trace id, is random as with the SDK's default. When a worker is
killed and another recovers its runs, the recovering execution's spans have the ids the
killed one's had, so the spans the killed execution ended before it died (a model call,
a finished tool) and the runs of children it started land under spans the backend
receives. Without it those point at parents that were never exported.

A span is still exported once: the killed execution never ended the run and step spans
it was in, and a step that a recovered run replays is not exported again. (An execution
killed between ending its run span and DBOS recording the workflow's end is the
exception: the recovering one exports the run span again, under the same id.)
"""

from __future__ import annotations

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from helix_dbos.observability.tracing import chosen_span_id


class StableSpanIds(IdGenerator):
    """Random ids, except the span ids helix chooses for its durable spans."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        chosen = chosen_span_id()
        return chosen if chosen is not None else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        return self._random.generate_trace_id()
