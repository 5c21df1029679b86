"""Where a run's span goes (``tracing.run_parent``) and the ids ``StableSpanIds`` gives,
with the OpenTelemetry SDK and no backend: the cases behind the Phoenix tests, one by one,
a traceparent that cannot be read among them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from helix_dbos._durable.payloads import continuation_workflow_id, run_workflow_id
from helix_dbos.observability.tracing import run_parent, session_span_context, stable_span_id, trace_parent

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _parent_of(context: object) -> trace.SpanContext:
    return trace.get_current_span(context).get_span_context()  # type: ignore[arg-type]


def test_a_run_started_from_no_span_joins_its_sessions_trace() -> None:
    context, links = run_parent("s1")
    assert _parent_of(context) == session_span_context("s1") and links == []


def test_a_run_nests_under_the_span_its_request_carries_with_a_link_to_its_session() -> None:
    context, links = run_parent("s1", CALLER)
    parent = _parent_of(context)
    assert (format(parent.trace_id, "032x"), format(parent.span_id, "016x")) == (
        "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert [link.context for link in links] == [session_span_context("s1")]


@pytest.mark.parametrize("bad", ["", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                                 "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"])
def test_a_traceparent_that_cannot_be_read_is_ignored(bad: str) -> None:
    context, links = run_parent("s1", bad)
    assert _parent_of(context) == session_span_context("s1") and links == []


def test_no_traceparent_without_a_span_and_the_current_spans_inside_one() -> None:
    tracer = TracerProvider().get_tracer("t")
    assert trace_parent() is None
    with tracer.start_as_current_span("caller") as span:
        ids = span.get_span_context()
        assert (trace_parent() or "").startswith(f"00-{ids.trace_id:032x}-{ids.span_id:016x}-")


def test_stable_ids_differ_between_a_runs_step_and_its_continuations_run() -> None:
    run = run_workflow_id("s1", 2)
    continuation = continuation_workflow_id("s1", 2, 1)
    assert continuation == f"{run}:step:1"  # why the kind is part of the key
    assert stable_span_id(("step", run, "1")) != stable_span_id(("run", continuation))


STABLE_IDS = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from helix_dbos.observability.span_ids import StableSpanIds
from helix_dbos.observability.tracing import stable_span_id, start_span

trace.set_tracer_provider(TracerProvider(id_generator=StableSpanIds()))
key = ("step", "helix:s1:run:1", "1")
keyed, again, plain = start_span("agent_step 1", key), start_span("agent_step 1", key), start_span("chat mock")
assert keyed.get_span_context().span_id == again.get_span_context().span_id == stable_span_id(key)
assert plain.get_span_context().span_id != stable_span_id(key)
assert keyed.get_span_context().trace_id != again.get_span_context().trace_id  # trace ids stay random
print("ok")
"""


def test_stable_span_ids_only_for_the_spans_helix_keys() -> None:
    """In a process of its own: a ``TracerProvider`` is installed once per process."""
    done = subprocess.run([sys.executable, "-c", STABLE_IDS], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
